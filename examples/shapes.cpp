// shapes.cpp - ktrace on a C++ program: classes, templates, STL
// containers, exceptions and threads, built with -finstrument-functions.
//
//   ktrace-example-shapes [ROUNDS]     (default 100)
//
// Each of 2 worker threads runs ROUNDS rounds: build a std::vector of
// shapes::Box<double>, sum their areas with the template
// shapes::total_area<double>, keep a std::map of counts, and every 4th
// round throw a shapes::bad_shape from shapes::check three traced frames
// below the catch (shapes::Registry::validate -> shapes::check ->
// shapes::fail).  The program counts its own calls and prints them as
// "count NAME N" lines; then it takes one snapshot and prints its path, so
// a test can compare the decoded call counts and nesting with what the
// program knows it did.
#include <ktrace.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace shapes {

struct counts {
	std::mutex mu;
	long total_area = 0, check = 0, fail = 0, validate = 0, area = 0, caught = 0;
};
static counts g_counts;

template <typename T> struct Box {
	T w, h;
	Box(T w_, T h_) : w(w_), h(h_) {}
	__attribute__((noinline)) T area() const;
};

template <typename T> __attribute__((noinline)) T Box<T>::area() const
{
	return w * h;
}

struct bad_shape : std::runtime_error {
	explicit bad_shape(const std::string &what) : std::runtime_error(what) {}
};

// The innermost traced frame an exception leaves.
__attribute__((noinline)) void fail(int round)
{
	throw bad_shape("round " + std::to_string(round));
}

__attribute__((noinline)) void check(int round)
{
	if (round % 4 == 3)
		fail(round);
}

template <typename T>
__attribute__((noinline)) T total_area(const std::vector<Box<T>> &boxes)
{
	T sum = 0;
	for (const auto &b : boxes)
		sum += b.area();
	return sum;
}

class Registry {
public:
	// Counts per kind; an exception from check() unwinds through here.
	__attribute__((noinline)) void validate(int round)
	{
		check(round);
		kinds_[round % 3]++;
	}
	long kinds(int k) const { return kinds_.count(k) ? kinds_.at(k) : 0; }

private:
	std::map<int, long> kinds_;
};

struct local_counts {
	long total_area = 0, check = 0, fail = 0, validate = 0, area = 0, caught = 0;
};

static void worker(int rounds, int boxes)
{
	Registry reg;
	local_counts c;
	double sink = 0;

	for (int r = 0; r < rounds; r++) {
		std::vector<Box<double>> v;
		for (int i = 0; i < boxes; i++)
			v.emplace_back(i + 1.0, r + 1.0);
		sink += total_area(v);
		c.total_area++;
		c.area += boxes;
		try {
			c.validate++;
			c.check++;
			if (r % 4 == 3)
				c.fail++;
			reg.validate(r);
		} catch (const bad_shape &) {
			c.caught++;
		}
	}
	if (sink < 0)
		std::printf("impossible\n");
	std::lock_guard<std::mutex> lk(g_counts.mu);
	g_counts.total_area += c.total_area;
	g_counts.check += c.check;
	g_counts.fail += c.fail;
	g_counts.validate += c.validate;
	g_counts.area += c.area;
	g_counts.caught += c.caught;
}

} // namespace shapes

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
	const int boxes = 8, nthreads = 2;
	std::vector<std::thread> th;
	char path[4096];

	if (rounds < 1 || rounds > 100000) {
		std::fprintf(stderr, "usage: %s [ROUNDS 1..100000]\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < nthreads; i++)
		th.emplace_back(shapes::worker, rounds, boxes);
	for (auto &t : th)
		t.join();
	const shapes::counts &c = shapes::g_counts;
	std::printf("count shapes::total_area<double> %ld\n", c.total_area);
	std::printf("count shapes::Box<double>::area %ld\n", c.area);
	std::printf("count shapes::Registry::validate %ld\n", c.validate);
	std::printf("count shapes::check %ld\n", c.check);
	std::printf("count shapes::fail %ld\n", c.fail);
	std::printf("caught %ld\n", c.caught);
	int r = ktrace_snapshot("shapes");
	if (r != 0 || ktrace_last_snapshot(path, sizeof(path)) < 0) {
		std::fprintf(stderr, "shapes: ktrace_snapshot: %s\n", ktrace_strerror(r));
		return 1;
	}
	std::printf("snapshot: %s\n", path);
	return 0;
}
