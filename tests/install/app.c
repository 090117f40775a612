/* A C program built against an installed ktrace (tests/install_test.sh). */
#include <ktrace.h>

#include <stdio.h>

static int work(int n) { return n < 2 ? n : work(n - 1) + work(n - 2); }

int main(void)
{
	char path[4096];
	int r = work(15);

	if (ktrace_snapshot("installed-c") != 0 || ktrace_last_snapshot(path, sizeof(path)) < 0)
		return 1;
	printf("result %d\nsnapshot: %s\n", r, path);
	return 0;
}
