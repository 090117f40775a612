/* lean_plugin.c - a shared library in the lean mode, dlopen'ed by
 * lean_prog (test_e2e_lean): plugin_outer(x) calls plugin_inner 3 times. */
static volatile int psink;

__attribute__((noinline)) int plugin_inner(int x)
{
	psink += x;
	return x + 1;
}

__attribute__((noinline)) int plugin_outer(int x)
{
	return plugin_inner(x) + plugin_inner(x + 1) + plugin_inner(x + 2);
}
