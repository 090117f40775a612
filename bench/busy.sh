#!/usr/bin/env bash
# busy.sh - ktrace on examples/busy_server.c: a request loop at tens of
# thousands of requests per second per core with planted slow requests.
#
#   bench/busy.sh [BUILD]        (BUILD: a configured build tree, default build/)
#
# 1. CPU: ROUNDS (3) interleaved rounds of SHORT_SECONDS (5) runs of the
#    three builds of busy_server, each pinned to cpu $CPU (0): plain (no
#    instrumentation), empty (-finstrument-functions, empty hooks), ktrace.
#    Prints the median cpu ns per request and requests/s of each, and the
#    median of the per-round ratios ktrace/plain, ktrace/empty, empty/plain.
# 2. Window: one ktrace run of BUSY_SECONDS (45, longer than the
#    KTRACE_WINDOW_S=30 target) with KTRACE_BUFFER_MB=2, a planted slow put
#    every PLANT_MS (1000), and the snapshot it takes when it ends; then
#    bench/reqsnap.sh: window held (measured, not projected, since the run
#    is longer than the window), kept requests, events and words per kept
#    request, and each planted request: present whole, with compact_segment.
#
# Settings: ROUNDS, SHORT_SECONDS, BUSY_SECONDS, PLANT_MS, WORK_US (8),
# CPU, KTRACE_BUFFER_MB (2), KTRACE_WINDOW_S (30), KEEP (a directory that
# keeps the snapshot and outputs).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build}
rounds=${ROUNDS:-3}
short=${SHORT_SECONDS:-5}
long=${BUSY_SECONDS:-45}
plant_ms=${PLANT_MS:-1000}
work_us=${WORK_US:-8}
cpu=${CPU:-0}
mb=${KTRACE_BUFFER_MB:-2}
window=${KTRACE_WINDOW_S:-30}

[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target ktrace-example-busy ktrace-example-busy-plain \
	ktrace-example-busy-empty ktrace-decode >/dev/null
bin=$build/examples/ktrace-example-busy
dec=$build/decoder/ktrace-decode

work=$(mktemp -d "${TMPDIR:-/tmp}/busy-bench.XXXXXX")
cleanup() {
	[ -n "${KEEP:-}" ] && { mkdir -p "$KEEP"; cp -r "$work"/. "$KEEP"/; }
	rm -rf "$work"
}
trap cleanup EXIT

field() { sed -n "s/.*[ ]$2=\([^ ]*\).*/\1/p" "$1" | head -1; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "== busy_server: $rounds rounds of ${short} s per build on cpu $cpu (work ${work_us} us per request)"
for r in $(seq "$rounds"); do
	# Rotate the order so no build always runs first.
	order=(plain empty ktrace)
	for i in $(seq $(((r - 1) % 3))); do order=("${order[@]:1}" "${order[0]}"); done
	for v in "${order[@]}"; do
		exe=$bin-$v
		[ "$v" = ktrace ] && exe=$bin
		mkdir -p "$work/r$r-$v"
		KTRACE_DIR="$work/r$r-$v" KTRACE_QUIET=1 KTRACE_BUFFER_MB=$mb KTRACE_WINDOW_S=$window \
			taskset -c "$cpu" "$exe" --seconds "$short" --work-us "$work_us" --no-snapshot \
			> "$work/r$r-$v.out"
		echo "$(field "$work/r$r-$v.out" cpu_ns_per_request) $(field "$work/r$r-$v.out" requests_per_s)" \
			> "$work/r$r-$v.fig"
	done
	for v in plain empty ktrace; do read -r c_$v q_$v < "$work/r$r-$v.fig"; done
	awk -v k="$c_ktrace" -v p="$c_plain" -v e="$c_empty" 'BEGIN { print k / p, k / e, e / p }' >> "$work/ratios"
	printf '  round %d: cpu ns/request plain %s, empty %s, ktrace %s\n' "$r" "$c_plain" "$c_empty" "$c_ktrace"
done
printf '%-8s %16s %12s\n' build cpu-ns/request requests/s
for v in plain empty ktrace; do
	c=$(for r in $(seq "$rounds"); do cut -d' ' -f1 "$work/r$r-$v.fig"; done | median)
	q=$(for r in $(seq "$rounds"); do cut -d' ' -f2 "$work/r$r-$v.fig"; done | median)
	printf '%-8s %16s %12.0f\n' "$v" "$c" "$q"
done
echo "median of per-round ratios (cpu per request): ktrace/plain $(cut -d' ' -f1 "$work/ratios" | median)," \
	"ktrace/empty $(cut -d' ' -f2 "$work/ratios" | median), empty/plain $(cut -d' ' -f3 "$work/ratios" | median)"

echo
echo "== window: one ktrace run of ${long} s, KTRACE_BUFFER_MB=$mb, KTRACE_WINDOW_S=$window, a planted slow put every ${plant_ms} ms"
mkdir -p "$work/long"
KTRACE_DIR="$work/long" KTRACE_QUIET=1 KTRACE_BUFFER_MB=$mb KTRACE_WINDOW_S=$window \
	taskset -c "$cpu" "$bin" --seconds "$long" --work-us "$work_us" --plant-ms "$plant_ms" \
	> "$work/long.out"
grep -E '^busy: (threads|cpu_s|kind|planted)' "$work/long.out" | sed 's/^/  /'
snap=$(sed -n 's/^busy: snapshot=//p' "$work/long.out")
[ -n "$snap" ] || { echo "busy.sh: no snapshot was written"; cat "$work/long.out"; exit 1; }
# Planted requests for reqsnap.sh: begin (s, 20 us early), kind, handler.
awk '/^busy: plant / {
	for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	printf "%.6f put compact_segment #%s-%s\n", f["begin_ns"] / 1e9 - 0.00002, f["i"],
		(f["waits"] > 0 ? "cpu+blocked" : "cpu")
}' "$work/long.out" > "$work/plants.log"
"$here/reqsnap.sh" "$dec" "$snap" "$work/plants.log" "$(field "$work/long.out" requests_per_s)"
