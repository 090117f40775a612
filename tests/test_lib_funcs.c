/*
 * test_lib_funcs.c - function and name tables (lib/funcs.c), white box.
 *
 * Function ids: stable per address, distinct per address, unique under
 * concurrent registration, and when the 2016 compact ids are used up the
 * function is still traced through full-address records (FUNCS lists it
 * with KTRACE_FUNC_NO_ID): nothing is silently dropped.  Name ids for
 * marks/spans/kinds, and the module map (hazard 8: metadata outlives the
 * ring).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "ktest.h"
#include "kunit.h"

void __cyg_profile_func_enter(void *fn, void *site);
void __cyg_profile_func_exit(void *fn, void *site);

/* Made-up addresses above 4 GiB so both halves of an address record are
 * exercised; the tables never dereference them. */
#define FAKE(n) ((uintptr_t)0x7f1200000000ull + (uintptr_t)(n) * 32u)

static int is_entry_ev(uint32_t ev)
{
	return ev >= KTRACE_EV_ENTER_BASE && ev < KTRACE_EV_ENTER_BASE + KTRACE_FUNC_ID_COUNT;
}

static int setup(void **state)
{
	(void)state;
	return ktrace_enabled() ? kunit_pin(0) : -1;
}

static int teardown(void **state)
{
	(void)state;
	return kunit_unpin();
}

static void test_funcs_id_stable_per_address(void **state)
{
	(void)state;
	uint32_t a = ktrace__func_event(FAKE(1));
	assert_true(is_entry_ev(a));
	for (int i = 0; i < 10; i++)
		assert_int_equal(ktrace__func_event(FAKE(1)), a);
}

static void test_funcs_ids_distinct(void **state)
{
	uint32_t ev[200];
	size_t before = ktrace__funcs_count();

	(void)state;
	for (int i = 0; i < 200; i++) {
		ev[i] = ktrace__func_event(FAKE(100 + i));
		assert_true(is_entry_ev(ev[i]));
		for (int j = 0; j < i; j++)
			assert_int_not_equal(ev[i], ev[j]);
	}
	assert_int_equal(ktrace__funcs_count(), before + 200);
	/* Asking again registers nothing new. */
	for (int i = 0; i < 200; i++)
		assert_int_equal(ktrace__func_event(FAKE(100 + i)), ev[i]);
	assert_int_equal(ktrace__funcs_count(), before + 200);
}

/* ---- concurrent registration -------------------------------------------------- */

#define NT 4
#define ROUNDS 15
#define SHARED 40        /* fresh addresses per round, registered by all */
#define OWN 25           /* addresses only one thread registers */

struct reg {
	pthread_t th;
	int idx;
	uint32_t shared_ev[ROUNDS][SHARED];
	uint32_t own_ev[OWN];
};

static pthread_barrier_t barrier;

static void *reg_main(void *arg)
{
	struct reg *r = arg;
	for (int round = 0; round < ROUNDS; round++) {
		/* All threads race for the same fresh slots at the same time. */
		pthread_barrier_wait(&barrier);
		for (int i = 0; i < SHARED; i++)
			r->shared_ev[round][i] = ktrace__func_event(FAKE(1000 + round * SHARED + i));
		if (round < OWN)
			r->own_ev[round] = ktrace__func_event(FAKE(5000 + r->idx * OWN + round));
	}
	for (int k = ROUNDS; k < OWN; k++)
		r->own_ev[k] = ktrace__func_event(FAKE(5000 + r->idx * OWN + k));
	return NULL;
}

/*
 * Threads registering the same new function at once must all get its id.
 * (A reader that finds the address before the claimer published the id
 * must wait for it, not take the zero-filled slot's 0, which is another
 * function's id.)
 */
static void test_funcs_concurrent_registration_unique(void **state)
{
	static struct reg r[NT];
	size_t before = ktrace__funcs_count();
	uint8_t *seen = calloc(KTRACE_FUNC_ID_COUNT + KTRACE_EV_ENTER_BASE, 1);
	int wrong = 0;

	(void)state;
	kunit_unpin();
	pthread_barrier_init(&barrier, NULL, NT);
	for (int i = 0; i < NT; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].idx = i;
		assert_int_equal(pthread_create(&r[i].th, NULL, reg_main, &r[i]), 0);
	}
	for (int i = 0; i < NT; i++)
		pthread_join(r[i].th, NULL);
	pthread_barrier_destroy(&barrier);
	kunit_pin(0);
	/* Same address, same id in every thread; the table's own answer now
	 * (all registrations finished) is the reference. */
	for (int round = 0; round < ROUNDS; round++)
		for (int s = 0; s < SHARED; s++) {
			uint32_t ref = ktrace__func_event(FAKE(1000 + round * SHARED + s));
			assert_true(is_entry_ev(ref));
			for (int i = 0; i < NT; i++)
				if (r[i].shared_ev[round][s] != ref) {
					if (wrong++ < 5)
						print_error("thread %d got event %03x for address %d, "
						            "which has %03x\n", i, r[i].shared_ev[round][s],
						            1000 + round * SHARED + s, ref);
				}
			assert_false(seen[ref]);
			seen[ref] = 1;
		}
	/* Distinct addresses, distinct ids. */
	for (int i = 0; i < NT; i++)
		for (int k = 0; k < OWN; k++) {
			assert_true(is_entry_ev(r[i].own_ev[k]));
			assert_false(seen[r[i].own_ev[k]]);
			seen[r[i].own_ev[k]] = 1;
		}
	assert_int_equal(ktrace__funcs_count(), before + ROUNDS * SHARED + NT * OWN);
	free(seen);
	assert_int_equal(wrong, 0);
}

/* ---- exhaustion ------------------------------------------------------------------ */

static struct ktrace_func_rec *copy_funcs(size_t *n)
{
	size_t cap = ktrace__funcs_count() + 16;
	struct ktrace_func_rec *f = malloc(cap * sizeof(*f));
	*n = ktrace__funcs_copy(f, cap);
	return f;
}

/*
 * A lookup reads few slots for code of small functions.  2,000 functions
 * 160 bytes apart (320 KiB): the table once gave each 64 KiB of code a
 * run of 256 slots in address order, which such code overfills, and a
 * lookup read 72 slots on average, 155 at most (the slow path of every
 * call that misses the thread's cache, and of every call of a function
 * past the compact ids).  Registered in address order, as a program's
 * first calls often go.
 */
#define DENSE(n) ((uintptr_t)0x7f3400001000ull + (uintptr_t)(n) * 160u)

static void test_funcs_dense_code_few_probes(void **state)
{
	uint64_t sum = 0;
	uint32_t most = 0;

	(void)state;
	for (uint32_t i = 0; i < 2000; i++)
		(void)ktrace__func_event(DENSE(i));
	for (uint32_t i = 0; i < 2000; i++) {
		uint32_t p = ktrace__funcs_test_probes(DENSE(i));

		assert_int_not_equal(p, 0);
		sum += p;
		most = p > most ? p : most;
	}
	print_message("probes: mean %.2f, most %u\n", (double)sum / 2000, most);
	assert_true(sum <= 2000 * 3);
	assert_true(most <= 32);
}

/*
 * Function names for KTRACE_EXCLUDE / INCLUDE (elfsym.c) through the
 * index sorted by address, as the tables' scan found them: this
 * program's own static functions (.symtab) and libc's, aliases and
 * IFUNCs among them (.symtab when the file has one, else .dynsym).
 */
static __attribute__((noinline, used)) int elf_probe_static(int x) { return x * 3 + 1; }

static void test_funcs_sym_names_indexed(void **state)
{
	static const char *const libc_fns[] = {"malloc", "free", "strlen", "memcpy", "printf",
		                               "qsort", "pthread_create", "open", "read", "getpid"};
	char a[256], b[256];
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	int found = 0;

	(void)state;
	assert_int_equal(ktrace__sym_name((uintptr_t)elf_probe_static, a, sizeof(a)), 0);
	assert_string_equal(a, "elf_probe_static");
	assert_int_equal(ktrace__sym_name((uintptr_t)test_funcs_sym_names_indexed, a, sizeof(a)), 0);
	assert_string_equal(a, "test_funcs_sym_names_indexed");
	assert_int_not_equal(ktrace__sym_name((uintptr_t)elf_probe_static + 1, a, sizeof(a)), 0);
	assert_non_null(libc);
	for (size_t i = 0; i < sizeof(libc_fns) / sizeof(libc_fns[0]); i++) {
		uintptr_t f = (uintptr_t)dlsym(libc, libc_fns[i]);
		int ra, rb;

		assert_true(f != 0);
		ra = ktrace__sym_name(f, a, sizeof(a));
		rb = ktrace__sym_name_test_scan(f, b, sizeof(b));
		assert_int_equal(ra, rb);
		if (ra == 0) {
			assert_string_equal(a, b);
			found++;
		}
	}
	/* (an IFUNC's dlsym gives the implementation, which may be unnamed) */
	assert_true(found >= 5);
	dlclose(libc);
}

static void test_funcs_exhaustion_uses_full_address(void **state)
{
	size_t before = ktrace__funcs_count(), nf;
	uint32_t fresh = 0, none = 0;

	(void)state;
	assert_true(before < KTRACE_FUNC_ID_COUNT);
	for (uint32_t i = 0; i < KTRACE_FUNC_ID_COUNT + 50; i++) {
		uint32_t ev = ktrace__func_event(FAKE(20000 + i));
		if (ev) {
			assert_true(is_entry_ev(ev));
			assert_int_equal(none, 0); /* no id after the first miss */
			fresh++;
		} else {
			none++;
		}
	}
	/* Exactly the compact space was handed out. */
	assert_int_equal(fresh + before, KTRACE_FUNC_ID_COUNT);
	assert_int_equal(none, 50 + before);
	/* Stable: an exhausted address stays without id, an early one keeps its id. */
	assert_int_equal(ktrace__func_event(FAKE(20000 + KTRACE_FUNC_ID_COUNT + 49)), 0);
	assert_true(is_entry_ev(ktrace__func_event(FAKE(20000))));

	/* FUNCS: every address once; compact ids unique; the rest NO_ID. */
	struct ktrace_func_rec *f = copy_funcs(&nf);
	uint8_t *seen = calloc(KTRACE_FUNC_ID_COUNT, 1);
	uint32_t noid = 0;
	assert_int_equal(nf, ktrace__funcs_count());
	for (size_t i = 0; i < nf; i++) {
		if (f[i].id == KTRACE_FUNC_NO_ID) {
			noid++;
			continue;
		}
		assert_true(f[i].id < KTRACE_FUNC_ID_COUNT);
		assert_false(seen[f[i].id]);
		seen[f[i].id] = 1;
	}
	assert_int_equal(noid, 50 + before);
	for (size_t i = 0; i < nf; i++)
		if (f[i].addr == FAKE(20000 + KTRACE_FUNC_ID_COUNT + 10))
			assert_int_equal(f[i].id, KTRACE_FUNC_NO_ID);
	free(seen);
	free(f);

	/* The hooks record such a function with FUNC_ENTER_ADDR/EXIT_ADDR
	 * records carrying the whole address. */
	uintptr_t a = FAKE(20000 + KTRACE_FUNC_ID_COUNT + 20);
	uint32_t start = KT_STATE_POS(atomic_load(&ktrace__g.cores[0].state));
	__cyg_profile_func_enter((void *)a, NULL);
	__cyg_profile_func_exit((void *)a, NULL);
	size_t cap = (size_t)ktrace__g.nblocks * (16 + 4096);
	unsigned char *buf = malloc(cap), *p;
	uint32_t nb;
	uint64_t race = 0;
	struct kt_walk w;
	memset(&w, 0, sizeof(w));
	w.tsc_shift = ktrace__g.tsc_shift;
	ktrace__ring_copy(0, buf, &nb, &race);
	p = buf;
	for (uint32_t b = 0; b < nb; b++) {
		struct ktrace_block_rec *r = (void *)p;
		if (kt_walk_block(&w, (uint32_t *)(r + 1), r->nwords, r->start))
			fail_msg("%s", w.why);
		p += sizeof(*r) + r->nwords * 4;
	}
	int enter = 0, exit_ = 0;
	for (size_t i = 0; i < w.n; i++) {
		const struct kt_rec *r = &w.recs[i];
		if (r->counter - start >= (1u << 30) || r->npayload < 2)
			continue;
		uint64_t addr = ((uint64_t)r->payload[1] << 32) | r->payload[0];
		if (r->ext_type == KTRACE_EXT_FUNC_ENTER_ADDR && addr == a) {
			assert_int_equal(r->ev, 3);
			assert_int_equal(r->slot, kt_self()->slot);
			enter++;
		}
		if (r->ext_type == KTRACE_EXT_FUNC_EXIT_ADDR && addr == a)
			exit_++;
	}
	assert_int_equal(enter, 1);
	assert_int_equal(exit_, 1);
	kt_walk_free(&w);
	free(buf);
}

/* ---- names ---------------------------------------------------------------------- */

static const char name_a[] = "alpha";
static const char name_b[] = "beta";
static const char name_a2[] = "alpha"; /* same text, other address */

static void test_funcs_name_ids(void **state)
{
	static char long_name[100];
	uint32_t a, b, a2, l, count;
	size_t cap = 1 << 20, used;
	unsigned char *buf = malloc(cap);
	int found = 0;

	(void)state;
	memset(long_name, 'x', sizeof(long_name) - 1);
	a = ktrace__name_id(name_a, KTRACE_NAME_MARK);
	b = ktrace__name_id(name_b, KTRACE_NAME_SPAN);
	a2 = ktrace__name_id(name_a2, KTRACE_NAME_REQUEST);
	l = ktrace__name_id(long_name, KTRACE_NAME_MARK);
	assert_true(a > 0 && b > 0 && a2 > 0 && l > 0);
	assert_true(a <= KTRACE_ARG24_MAX && b <= KTRACE_ARG24_MAX);
	assert_int_not_equal(a, b);
	assert_int_not_equal(a, a2);   /* remembered by address */
	assert_int_equal(ktrace__name_id(name_a, KTRACE_NAME_MARK), a);
	assert_string_equal(ktrace__name_text(a), "alpha");
	assert_string_equal(ktrace__name_text(b), "beta");
	assert_int_equal(strlen(ktrace__name_text(l)), 63);
	assert_string_equal(ktrace__name_text(0), "");

	used = ktrace__names_serialize(buf, cap, &count);
	assert_true(count >= 4);
	for (size_t off = 0, k = 0; k < count; k++) {
		struct ktrace_name_rec r;
		assert_true(off + sizeof(r) <= used);
		memcpy(&r, buf + off, sizeof(r));
		if (r.id == b) {
			assert_int_equal(r.kind, KTRACE_NAME_SPAN);
			assert_int_equal(r.len, 4);
			assert_memory_equal(buf + off + sizeof(r), "beta", 4);
			found++;
		}
		if (r.id == a2) {
			assert_int_equal(r.kind, KTRACE_NAME_REQUEST);
			found++;
		}
		off += (sizeof(r) + r.len + 3) & ~3u;
		if (k + 1 == count)
			assert_int_equal(off, used);
	}
	assert_int_equal(found, 2);
	free(buf);
}

/* The module map lists this executable's code (for symbolization). */
static void test_funcs_module_map_has_executable(void **state)
{
	size_t cap = 1024 * 296;
	unsigned char *buf = malloc(cap);
	uint32_t count;
	size_t used, off = 0;
	uint64_t me = (uint64_t)(uintptr_t)&test_funcs_module_map_has_executable;
	int found = 0;

	(void)state;
	ktrace__module_note((uintptr_t)me);
	used = ktrace__modules_serialize(buf, cap, &count);
	assert_true(count >= 1);
	for (uint32_t k = 0; k < count; k++) {
		struct ktrace_module_rec r;
		memcpy(&r, buf + off, sizeof(r));
		if (me >= r.start && me < r.end) {
			char path[300];
			snprintf(path, sizeof(path), "%.*s", (int)r.path_len, buf + off + sizeof(r));
			assert_non_null(strstr(path, "test_lib_funcs"));
			found = 1;
		}
		off += (sizeof(r) + r.path_len + 7) & ~(size_t)7;
	}
	assert_int_equal(off, used);
	assert_true(found);
	free(buf);
}

/*
 * A module mapped while another thread's scan is under way (it may have
 * read the maps before the mapping): a thread whose function lies there
 * waits for that scan and scans again, so the module is known when its
 * first call returns (eight threads dlopening their own libraries at once
 * left one library unnamed, and its KTRACE_EXCLUDE'd functions recorded,
 * in about one run in ten).  The scanning thread itself (a signal handler
 * that interrupted its scan) does not wait.
 */
static pthread_barrier_t scan_bar;
static void *scan_holder_thread(void *arg)
{
	(void)arg;
	ktrace__modules_test_hold(1);
	pthread_barrier_wait(&scan_bar);   /* held */
	pthread_barrier_wait(&scan_bar);   /* the noter is on its way */
	usleep(50 * 1000);
	ktrace__modules_test_hold(0);
	return NULL;
}

static void *scan_noter_thread(void *arg)
{
	pthread_barrier_wait(&scan_bar);
	ktrace__module_note((uintptr_t)arg);
	return NULL;
}

static void test_funcs_module_mapped_during_scan(void **state)
{
	char path[300];
	uint64_t start, off;
	pthread_t h, n;
	int fd = open("/proc/self/exe", O_RDONLY);
	void *m;

	(void)state;
	assert_true(fd >= 0);
	pthread_barrier_init(&scan_bar, NULL, 2);
	assert_int_equal(pthread_create(&h, NULL, scan_holder_thread, NULL), 0);
	pthread_barrier_wait(&scan_bar);
	/* mapped after the held scan began: executable, with a path */
	m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(ktrace__module_of((uintptr_t)m + 16, &start, &off, path, sizeof(path)), -1);
	assert_int_equal(pthread_create(&n, NULL, scan_noter_thread, (char *)m + 16), 0);
	assert_int_equal(pthread_join(n, NULL), 0);
	assert_int_equal(pthread_join(h, NULL), 0);
	assert_int_equal(ktrace__modules_test_timeouts(), 0);   /* it waited, then scanned */
	assert_int_equal(ktrace__module_of((uintptr_t)m + 16, &start, &off, path, sizeof(path)), 0);
	assert_int_equal(start, (uint64_t)(uintptr_t)m);
	assert_non_null(strstr(path, "test_lib_funcs"));
	pthread_barrier_destroy(&scan_bar);

	/* its own scan: no wait (it would never end) */
	munmap(m, 4096);
	m = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	assert_true(m != MAP_FAILED);
	uint32_t gave_up = ktrace__modules_test_timeouts();
	ktrace__modules_test_hold(1);
	ktrace__module_note((uintptr_t)m + 16);
	ktrace__modules_test_hold(0);
	assert_int_equal(ktrace__modules_test_timeouts(), gave_up);   /* returned at once */
	ktrace__module_note((uintptr_t)m + 16);   /* and the next one scans */
	assert_int_equal(ktrace__module_of((uintptr_t)m + 16, &start, &off, path, sizeof(path)), 0);
	munmap(m, 8192);
	close(fd);
}

int main(int argc, char **argv)
{
	static const char *const env[] = {"KTRACE_BUFFER_MB=1", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_funcs_id_stable_per_address),
		cmocka_unit_test(test_funcs_ids_distinct),
		cmocka_unit_test(test_funcs_name_ids),
		cmocka_unit_test(test_funcs_module_map_has_executable),
		cmocka_unit_test(test_funcs_module_mapped_during_scan),
		cmocka_unit_test(test_funcs_sym_names_indexed),
	};
	const struct CMUnitTest threaded[] = {
		cmocka_unit_test(test_funcs_concurrent_registration_unique),
	};
	/* Last: uses up the compact id space of this process. */
	const struct CMUnitTest exhaustion[] = {
		cmocka_unit_test(test_funcs_exhaustion_uses_full_address),
		cmocka_unit_test(test_funcs_dense_code_few_probes),
	};
	int r;

	(void)argc;
	kunit_reexec(argv, env);
	r = cmocka_run_group_tests_name("funcs", tests, setup, teardown);
	r |= cmocka_run_group_tests_name("funcs_threads", threaded, setup, teardown);
	r |= cmocka_run_group_tests_name("funcs_exhaustion", exhaustion, setup, teardown);
	kunit_cleanup();
	return r;
}
