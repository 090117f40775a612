/*
 * lean_mixed_fi.c - the default-mode half of e2e_lean_mixed: built with
 * -finstrument-functions and linked with lean_prog.c built in the lean
 * mode, a program that mixes the two modes (test_e2e_lean mixed).
 */
__attribute__((noinline)) int mixed_leaf(int x)
{
	return x * 3 + 1;
}

/* n calls of mixed_leaf and of cb, a lean function of lean_prog.c. */
__attribute__((noinline)) int mixed_fi_run(int n, int (*cb)(int))
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += mixed_leaf(i) + cb(i);
	return s;
}
