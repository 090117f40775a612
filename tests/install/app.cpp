// A C++ program built against an installed ktrace: ktrace.h from C++
// (extern "C"), templates and an exception (tests/install_test.sh).
#include <ktrace.h>

#include <cstdio>
#include <stdexcept>

namespace app {
template <typename T> T twice(T v) { return v + v; }
void boom() { throw std::runtime_error("x"); }
}

int main()
{
	char path[4096];
	int r = app::twice(21);

	try {
		app::boom();
	} catch (const std::exception &) {
		r++;
	}
	ktrace_mark("installed-cxx", (uint64_t)r);
	if (ktrace_snapshot("installed-cxx") != 0 || ktrace_last_snapshot(path, sizeof(path)) < 0)
		return 1;
	std::printf("result %d\nsnapshot: %s\n", r, path);
	return 0;
}
