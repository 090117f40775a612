// lean_cxx.cc - C++ exceptions in the lean mode (test_e2e_lean): main
// calls thrower() ROUNDS times inside try; thrower > level1 > level2 >
// level3, which throws; level2 holds a Guard whose destructor runs during
// the unwinding; the catch in main then calls after_catch().  Prints
// "snapshot <rc> <path>".
#include <cstdio>
#include <stdexcept>

#include "ktrace.h"

#define ROUNDS 5

static volatile int sink;

struct Guard {
	__attribute__((noinline)) ~Guard() { sink++; }
};

__attribute__((noinline)) void level3(int x)
{
	if (x >= 0)
		throw std::runtime_error("boom");
	sink++;
}

__attribute__((noinline)) void level2(int x)
{
	Guard g;
	level3(x);
	sink++;
}

__attribute__((noinline)) void level1(int x) { level2(x); sink++; }
__attribute__((noinline)) void thrower(int x) { level1(x); sink++; }
__attribute__((noinline)) void after_catch() { sink += 2; }

int main()
{
	char path[4096] = "";
	int caught = 0;

	for (int i = 0; i < ROUNDS; i++) {
		try {
			thrower(i);
		} catch (const std::exception &) {
			caught++;
			after_catch();
		}
	}
	int rc = ktrace_snapshot("cxx");
	ktrace_last_snapshot(path, sizeof(path));
	std::printf("caught %d\nsnapshot %d %s\n", caught, rc, path);
	return rc != 0 || caught != ROUNDS;
}
