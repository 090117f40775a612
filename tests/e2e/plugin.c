/*
 * plugin.c - an instrumented shared library that lifecycle_prog dlopen()s,
 * calls and dlclose()s before its snapshot: its functions must still
 * symbolize (the module map outlives the mapping).
 */
volatile int plugin_sink;

__attribute__((noinline)) void plugin_inner(void)
{
	plugin_sink++;
}

__attribute__((noinline)) int plugin_entry(void)
{
	plugin_inner();
	plugin_inner();
	return plugin_sink;
}
