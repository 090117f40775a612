/*
 * lean_reload.c - a lean shared library built twice, as RL=a and RL=b, for
 * test_e2e_lean's reload: lean_prog loads a, waits for a_leaf (excluded by
 * the test) to be patched out, unloads it and loads b, which the loader
 * may put where a was, inside the time ktrace keeps a's code writable.
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

long KT_CAT(RL, _run)(long n)
{
	long s = 0;

	for (long i = 0; i < n; i++)
		s += KT_CAT(RL, _leaf)(i);
	return s;
}
