#!/usr/bin/env bash
# bench/lean_floor.sh [BUILD] [RUNS] - a recorded call in place, both modes,
# against its floor: Lua 5.4 bench.lua and SQLite's speedtest1 (peerbench's
# sources and compiles), each built and linked as
#
#   plain        -O2
#   fi-floor     -finstrument-functions + peerbench's hook_rdtsc.c (rdtsc
#                and a 4-byte store: peerbench's "rdtsc" row)
#   fi-all       -finstrument-functions + libktrace, KTRACE_FILTER=off
#   lean-floor   lean_cflags + bench/floor_lean.c (rdtsc and a 4-byte store
#                in __fentry__/__return__)
#   lean-all     lean_cflags + libktrace, KTRACE_FILTER=off
#   lean         lean_cflags + libktrace, default settings
#   lean-nop     every entry and exit site a nop from the start and no
#                runtime (-pg -mfentry -mnop-mcount -minstrument-return=nop5,
#                non-PIE: GCC refuses -mnop-mcount with -fpie): what the
#                lean mode's code costs once every site is patched out, so
#                lean / lean-nop is the runtime's share (and PIE's against
#                non-PIE: a scratch A/B of the plain builds measured 0.994x)
#
# and timed in RUNS interleaved rounds (rotating order, wall time).  Prints
# each build's median time and its median ratio to plain, the calls each
# build makes (counting hooks: hook_count.c, bench/count_lean.c), and per
# mode the figure the lean issue asks for: the recorded call's cost over the
# plain build against its floor's, (t - plain) / (floor - plain), the median
# of the per-round values, with both in ns per call.  A figure, never a test.
#
# The kernel's perf scheduling hooks are held on for the rounds
# (bench/perf_warm.c): a traced program's first perf_event_open otherwise
# waits 5-16 ms to turn them on whenever no process has held them for a
# second, which with the builds alternating falls on some traced runs and
# not others.  The script prints what turning them on cost: the start-up
# stall of a traced program run alone (PERF_WARM=0: not held).
#
# BUILD is a configured and built ktrace tree (libktrace.a, ktrace.pc with
# lean_cflags; x86-64 and GCC).  PB_BUILD (default BUILD/peerbench) holds
# peerbench's compiles, shared with its run.sh when pointed at the same
# directory.  Loads: LUA_SCALE (1), SQLITE_SIZE (8), WORKLOADS ("lua
# sqlite").
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-build}" && pwd) || exit 2
runs=${2:-11}
PEERBENCH=${PEERBENCH:-/work/shared/peerbench}
export PB_BUILD=${PB_BUILD:-$build/peerbench}
LUA_SCALE=${LUA_SCALE:-1}
SQLITE_SIZE=${SQLITE_SIZE:-8}
WORKLOADS=${WORKLOADS:-lua sqlite}
lib=$(find "$build/lib" -name libktrace.a | head -1)
pc=$build/lib/ktrace.pc
[ -n "$lib" ] && [ -f "$pc" ] || {
	echo "lean_floor: build ktrace first (no libktrace.a or ktrace.pc under $build/lib)" >&2
	exit 2
}
lean=$(sed -n 's/^lean_cflags=//p' "$pc" | head -1)
[ -n "$lean" ] || { echo "lean_floor: this build has no lean mode (lean_cflags is empty in $pc: x86-64 with GCC only)" >&2; exit 2; }
[ -f "$PEERBENCH/build.sh" ] || { echo "lean_floor: peerbench not found at $PEERBENCH (set PEERBENCH)" >&2; exit 2; }
# shellcheck source=/dev/null
source "$PEERBENCH/build.sh"
# shellcheck source=bench/pb_workload.sh
source "$here/pb_workload.sh"
mkdir -p "$PB_BUILD/log" "$PB_BUILD/bin" "$PB_BUILD/leanfloor/run"
out=$PB_BUILD/leanfloor
bin=$PB_BUILD/bin
PLAN_FILE=$PB_BUILD/log/leanfloor-plan.txt
: > "$PLAN_FILE"
# shellcheck disable=SC2034,SC2154 # build.sh's arrays, read by plan_set
FL_CC[gcc-lean]=$GCC FL_FLAGS[gcc-lean]="$OPT $lean"
# shellcheck disable=SC2034,SC2154 # the same, the lean-nop row's
FL_CC[gcc-leannop]=$GCC FL_FLAGS[gcc-leannop]="$OPT -fno-pie -pg -mfentry -mnop-mcount -minstrument-return=nop5"
build_runtime || { echo "lean_floor: peerbench's runtime hooks did not build" >&2; exit 1; }
# the lean floor and counter, never instrumented
gcc -O2 -c "$here/floor_lean.c" -o "$out/floor_lean.o" &&
gcc -O2 -c "$here/count_lean.c" -o "$out/count_lean.o" &&
gcc -O2 "$here/perf_warm.c" -o "$out/perf_warm" || exit 1

declare -A CFLAGS SRCS LIBS ARGS
for wl in $WORKLOADS; do
	pb_workload lean_floor "$wl" || exit $?
	# shellcheck disable=SC2086
	for fl in gcc-plain gcc-fi gcc-lean gcc-leannop; do plan_set "$wl" "$fl" "${CFLAGS[$wl]}" ${SRCS[$wl]}; done
done
run_compiles

rt=$PB_BUILD/rt
for wl in $WORKLOADS; do
	for fl in gcc-plain gcc-fi gcc-lean gcc-leannop; do
		set_ok "$wl" "$fl" || { echo "lean_floor: $wl/$fl did not compile (see $PB_BUILD/obj/$wl/$fl/compile.log)" >&2; exit 1; }
	done
	fio=$(objs "$wl" gcc-fi) lo=$(objs "$wl" gcc-lean) l=${LIBS[$wl]}
	# link's cache keys on the objects and the command, not on libktrace.a
	rm -f "$bin/$wl.lf-fi" "$bin/$wl.lf-lean"
	link "$bin/$wl.plain" "$GCC" "$(objs "$wl" gcc-plain)" "$l" &&
	link "$bin/$wl.rdtsc" "$GCC" "$fio $rt/hook_rdtsc.o" "$l" &&
	link "$bin/$wl.count-fi" "$GCC" "$fio $rt/hook_count.o" "$l" &&
	link "$bin/$wl.lf-fi" "$GCC" "$fio" "$lib -lpthread $l" &&
	link "$bin/$wl.lf-leanfloor" "$GCC" "$lo $out/floor_lean.o" "$l" &&
	link "$bin/$wl.lf-count-lean" "$GCC" "$lo $out/count_lean.o" "$l" &&
	link "$bin/$wl.lf-lean" "$GCC" "$lo" "$lib -lpthread $l" &&
	link "$bin/$wl.lf-leannop" "$GCC" "$(objs "$wl" gcc-leannop)" "-no-pie $l" || exit 1
done

# build name -> binary suffix, environment
declare -A BIN ENVS
BIN[plain]=plain BIN[fi-floor]=rdtsc BIN[fi-all]=lf-fi
BIN[lean-floor]=lf-leanfloor BIN[lean-all]=lf-lean BIN[lean]=lf-lean BIN[lean-nop]=lf-leannop
ENVS[fi-all]=KTRACE_FILTER=off ENVS[lean-all]=KTRACE_FILTER=off
builds="plain fi-floor fi-all lean-floor lean-all lean lean-nop"

calls() { # wl binary-suffix -> calls of one run (entries)
	# shellcheck disable=SC2086
	( cd "$out/run" && PB_COUNT_FILE=$out/count "$bin/$1.$2" ${ARGS[$1]} >/dev/null ) && cut -d' ' -f1 "$out/count"
}
wall() { # wl build -> appends microseconds to $out/t.wl.build
	local s e
	s=$(date +%s%N)
	# shellcheck disable=SC2086
	( cd "$out/run" && env ${ENVS[$2]:-} KTRACE_DIR=. KTRACE_QUIET=1 "$bin/$1.${BIN[$2]}" ${ARGS[$1]} >/dev/null )
	e=$(date +%s%N)
	echo "$(( (e - s) / 1000 ))" >> "$out/t.$1.$2"
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
warm_note="perf scheduling hooks not held (PERF_WARM=0)"
if [ "${PERF_WARM:-1}" != 0 ]; then
	sleep 1.2   # the hooks off again if nothing else holds them: the stall measured
	"$out/perf_warm" > "$out/perf_warm.out" 2>&1 &
	warm_pid=$!
	trap 'kill "$warm_pid" 2>/dev/null' EXIT
	for _ in $(seq 50); do grep -q . "$out/perf_warm.out" && break; sleep 0.05; done
	stall=$(sed -n 's/^perf_warm: first open \([0-9.]*\) ms$/\1/p' "$out/perf_warm.out")
	if [ -n "$stall" ]; then
		warm_note="perf scheduling hooks held on (bench/perf_warm.c); turning them on took $stall ms, the start-up stall of a traced program run alone"
	else
		warm_note="perf scheduling hooks not held: $(head -1 "$out/perf_warm.out")"
	fi
fi
echo
echo "a recorded call in place against its floor, $runs interleaved rounds (load before: $(cut -d' ' -f1-3 /proc/loadavg))"
echo "  ($warm_note)"
for wl in $WORKLOADS; do
	rm -f "$out"/t."$wl".* "$out"/r."$wl".*
	cfi=$(calls "$wl" count-fi) clean=$(calls "$wl" lf-count-lean)
	read -ra bs <<<"$builds"
	for ((i = 0; i < runs; i++)); do
		for ((k = 0; k < ${#bs[@]}; k++)); do wall "$wl" "${bs[(i + k) % ${#bs[@]}]}"; done
		p=$(tail -1 "$out/t.$wl.plain")
		for b in $builds; do
			awk -v p="$p" -v t="$(tail -1 "$out/t.$wl.$b")" 'BEGIN { printf "%.4f\n", t / p }' >> "$out/r.$wl.$b"
		done
		awk -v n="$(tail -1 "$out/t.$wl.lean-nop")" -v t="$(tail -1 "$out/t.$wl.lean")" \
			'BEGIN { printf "%.4f\n", t / n }' >> "$out/r.$wl.lean-over-nop"
		for m in "fi" lean; do
			awk -v p="$p" -v f="$(tail -1 "$out/t.$wl.$m-floor")" -v t="$(tail -1 "$out/t.$wl.$m-all")" \
				'BEGIN { printf "%.4f\n", (f > p) ? (t - p) / (f - p) : 0 }' >> "$out/r.$wl.$m-over-floor"
		done
	done
	echo "  $wl (${ARGS[$wl]}): $cfi calls with -finstrument-functions, $clean in the lean build"
	printf '    %-11s %10s %8s\n' build "median s" "x plain"
	for b in $builds; do
		printf '    %-11s %10.3f %7.3fx\n' "$b" "$(median < "$out/t.$wl.$b" | awk '{print $1 / 1e6}')" "$(median < "$out/r.$wl.$b")"
	done
	printf '    lean default over lean-nop (the runtime, every site a nop at start): %.3fx (median of the rounds)\n' \
		"$(median < "$out/r.$wl.lean-over-nop")"
	for m in "fi" lean; do
		c=$cfi; [ "$m" = lean ] && c=$clean
		awk -v m="$m" -v c="$c" -v r="$(median < "$out/r.$wl.$m-over-floor")" -v p="$(median < "$out/t.$wl.plain")" \
			-v f="$(median < "$out/t.$wl.$m-floor")" -v t="$(median < "$out/t.$wl.$m-all")" 'BEGIN {
			printf "    %-4s recorded call over plain: %.1f ns, its floor %.1f ns: %.3fx the floor (median of the rounds)\n",
				m, (t - p) * 1000 / c, (f - p) * 1000 / c, r }'
	done
done
echo "  (load after: $(cut -d' ' -f1-3 /proc/loadavg))"
