/*
 * lean_reload.c - a lean shared library built twice, as RL=a and RL=b, for
 * test_e2e_lean's reload: lean_prog loads a, waits for a_leaf (excluded by
 * the test) to be patched out, makes a's code read+exec itself (as a
 * hardening step or another patcher may) and waits for a_leaf2, then
 * unloads a and loads b, which the loader may put where a was, inside the
 * time ktrace keeps that code writable; and RL_f0 .. RL_f639, more sites
 * than one batch takes, all excluded, to be patched out again after b is
 * loaded.
 */
#define KT_CAT2(x, y) x##y
#define KT_CAT(x, y) KT_CAT2(x, y)

/* 16 KiB of code before the leaf: its sites lie pages into the segment */
__attribute__((noinline)) void KT_CAT(RL, _fill)(void)
{
	__asm__ volatile(".skip 16384, 0x90");
}

__attribute__((noinline)) long KT_CAT(RL, _leaf)(long x)
{
	__asm__ volatile("");
	return x * 3 + 1;
}

__attribute__((noinline)) long KT_CAT(RL, _leaf2)(long x)
{
	__asm__ volatile("");
	return x * 5 + 1;
}

long KT_CAT(RL, _run)(long n)
{
	long s = 0;

	for (long i = 0; i < n; i++)
		s += KT_CAT(RL, _leaf)(i);
	return s;
}

long KT_CAT(RL, _run2)(long n)
{
	long s = 0;

	for (long i = 0; i < n; i++)
		s += KT_CAT(RL, _leaf2)(i);
	return s;
}

#define F1(n)                                                                       \
	__attribute__((noinline)) long KT_CAT(RL, _f##n)(long x)                    \
	{                                                                           \
		__asm__ volatile("");                                               \
		return x + n;                                                       \
	}
#define F10(n) F1(n##0) F1(n##1) F1(n##2) F1(n##3) F1(n##4) F1(n##5) F1(n##6) F1(n##7) \
	F1(n##8) F1(n##9)
#define F100(n) F10(n##0) F10(n##1) F10(n##2) F10(n##3) F10(n##4) F10(n##5) F10(n##6) \
	F10(n##7) F10(n##8) F10(n##9)
F10() F10(1) F10(2) F10(3) F10(4) F10(5) F10(6) F10(7) F10(8) F10(9)
F100(1) F100(2) F100(3) F100(4) F100(5)

#define P1(n) (const void *)KT_CAT(RL, _f##n),
#define P10(n) P1(n##0) P1(n##1) P1(n##2) P1(n##3) P1(n##4) P1(n##5) P1(n##6) P1(n##7) \
	P1(n##8) P1(n##9)
#define P100(n) P10(n##0) P10(n##1) P10(n##2) P10(n##3) P10(n##4) P10(n##5) P10(n##6) \
	P10(n##7) P10(n##8) P10(n##9)
static const void *const many[] = {
	P10() P10(1) P10(2) P10(3) P10(4) P10(5) P10(6) P10(7) P10(8) P10(9)
	P100(1) P100(2) P100(3) P100(4) P100(5)
};

/* The i-th of the many (NULL past them); their count */
const void *KT_CAT(RL, _many)(int i)
{
	return i >= 0 && i < (int)(sizeof(many) / sizeof(many[0])) ? many[i] : (const void *)0;
}

/* Call each of the many once */
long KT_CAT(RL, _run_many)(void)
{
	long s = 0;

	for (unsigned i = 0; i < sizeof(many) / sizeof(many[0]); i++)
		s += ((long (*)(long))many[i])((long)i);
	return s;
}
