/*
 * busy_hooks.c - empty -finstrument-functions hooks for
 * ktrace-example-busy-empty: the cost of the calls the compiler inserts,
 * without anything done in them.
 */
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *fn, void *site);
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *fn, void *site);

void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)fn;
	(void)site;
}

void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)fn;
	(void)site;
}
