/*
 * snapshot.c - the snapshot API: ktrace_snapshot() and
 * ktrace_last_snapshot().
 *
 * ktrace_snapshot() queues a request under api_mu, wakes the writer
 * (writer.c) and waits on api_cv for it to finish that request (only the
 * caller waits; tracing goes on).  The writer serves the requests in
 * ktrace__api_serve, letting api_mu go while it writes each file.  How a
 * request becomes a file: snapshot.h.
 *
 * Lock: api_mu, a leaf (snapshot.h).
 */
#include "snapshot.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t api_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t api_cv = PTHREAD_COND_INITIALIZER;
static uint64_t api_asked, api_done;   /* under api_mu */
static char api_reason[128];           /* under api_mu */
static int api_result;                 /* under api_mu */
static char last_path[4352];           /* under api_mu */

/* ---- API ---------------------------------------------------------------------- */

__attribute__((visibility("default"))) KT_NOINSTR int ktrace_snapshot(const char *reason)
{
	uint64_t mine;
	int r;

	if (!ktrace__ensure_init())
		return ktrace__off_reason();
	ktrace__hold_before_snapshot();   /* the caller's own request, if any */
	if (!ktrace__writer_ready())
		return KTRACE_ENOTREADY;
	if (ktrace__writer_is_self())
		return KTRACE_EBUSY;
	pthread_mutex_lock(&api_mu);
	snprintf(api_reason, sizeof(api_reason), "%s", reason ? reason : "api");
	mine = ++api_asked;
	ktrace__writer_wake();
	while (api_done < mine)
		pthread_cond_wait(&api_cv, &api_mu);
	r = api_result;
	pthread_mutex_unlock(&api_mu);
	return r;
}

__attribute__((visibility("default"))) KT_NOINSTR int ktrace_last_snapshot(char *buf, size_t len)
{
	int r = KTRACE_EINVAL;
	size_t n;

	if (buf == NULL)
		return KTRACE_EINVAL;
	pthread_mutex_lock(&api_mu);
	n = strlen(last_path);
	if (n > 0 && n < len) {
		memcpy(buf, last_path, n + 1);
		r = (int)n;
	}
	pthread_mutex_unlock(&api_mu);
	return r;
}

KT_NOINSTR int ktrace__api_pending(void)
{
	int p;

	pthread_mutex_lock(&api_mu);
	p = api_asked != api_done;
	pthread_mutex_unlock(&api_mu);
	return p;
}

/* Writer: every file asked for, each written without api_mu held. */
KT_NOINSTR void ktrace__api_serve(void)
{
	pthread_mutex_lock(&api_mu);
	while (api_done < api_asked) {
		char reason[128], path[4352] = "";
		uint64_t n = api_asked;
		memcpy(reason, api_reason, sizeof(reason));
		pthread_mutex_unlock(&api_mu);
		int r = ktrace__snapshot_write(reason, NULL, path, sizeof(path));
		pthread_mutex_lock(&api_mu);
		api_result = r;
		if (r == 0)
			memcpy(last_path, path, sizeof(last_path));
		api_done = n;
		pthread_cond_broadcast(&api_cv);
	}
	pthread_mutex_unlock(&api_mu);
}

/* Fork child: api_mu may have been held by a parent thread; start over
 * with fresh ones.  The parent's requests and file are its own. */
KT_NOINSTR void ktrace__api_fork_child(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

	memcpy(&api_mu, &m, sizeof(m));
	memcpy(&api_cv, &cv, sizeof(cv));
	api_asked = api_done = 0;
	last_path[0] = 0;
}
