/*
 * hello.c - the smallest use of ktrace.
 *
 * Build with -finstrument-functions and link libktrace: every function
 * below is recorded with no call to ktrace at all.  The one call,
 * ktrace_snapshot(), writes the window to $KTRACE_DIR (default ".") and
 * ktrace_last_snapshot() says where; then
 *
 *   ktrace-decode --format text <that file>
 *
 * shows main -> greet -> shout and count_letters, with their times.
 */
#include <ktrace.h>

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static int count_letters(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += isalpha((unsigned char)*s) != 0;
	return n;
}

static void shout(char *s)
{
	for (; *s; s++)
		*s = (char)toupper((unsigned char)*s);
}

static void greet(const char *who)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "hello, %s", who);
	shout(buf);
	printf("%s (%d letters)\n", buf, count_letters(buf));
}

int main(void)
{
	char path[4096];
	int r;

	greet("world");
	greet("ktrace");
	r = ktrace_snapshot("hello");
	if (r != 0) {
		fprintf(stderr, "hello: ktrace_snapshot: %s\n", ktrace_strerror(r));
		return 1;
	}
	if (ktrace_last_snapshot(path, sizeof(path)) < 0) {
		fprintf(stderr, "hello: no snapshot path\n");
		return 1;
	}
	printf("snapshot: %s\n", path);
	printf("decode it: ktrace-decode --format text %s\n", path);
	return 0;
}
