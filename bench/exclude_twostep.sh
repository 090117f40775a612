#!/usr/bin/env bash
# bench/exclude_twostep.sh [BUILD] [RUNS] - the two-step way to near-zero
# overhead (issue 7), on Lua 5.4 and SQLite's speedtest1, end to end:
#
#   1. build each program with -finstrument-functions and libktrace (the
#      "full" build), run it once with default settings, with a snapshot
#      every SNAP_EVERY seconds (SIGUSR2) and one when main returns
#      (snap_at_end.c, linked with -Wl,--wrap=main);
#   2. flags=$(ktrace-decode --format exclude SNAPSHOTS...), rebuild with
#      them (the "excluded" build, still linked with libktrace); if the
#      notes offer hot functions with a rare very long call ("to go
#      further:"), also a "further" build with that longer flag;
#   3. time the uninstrumented, full, excluded (and further) builds in RUNS
#      interleaved rounds (rotating order) and print the medians and the
#      median of the per-round ratios to the uninstrumented build, with the
#      instrumented calls each build makes (a counting hook build).
#
# Sources and compiles come from peerbench (/work/shared/peerbench/build.sh,
# sourced: PB_BUILD defaults to BUILD/peerbench here, PB_MIRRORS as there).
# Loads: LUA_SCALE (6: bench.lua at ~1 s), SQLITE_SIZE (32), WORKLOADS
# ("lua sqlite").  BUILD is a configured and built ktrace tree (libktrace.a,
# ktrace-decode), ideally Release.  The decoder's notes go to
# $PB_BUILD/exclude/WORKLOAD.notes.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(dirname "$here")
build=$(cd "${1:-build}" && pwd) || exit 2
runs=${2:-5}
PEERBENCH=${PEERBENCH:-/work/shared/peerbench}
export PB_BUILD=${PB_BUILD:-$build/peerbench}
LUA_SCALE=${LUA_SCALE:-6}
SQLITE_SIZE=${SQLITE_SIZE:-32}
WORKLOADS=${WORKLOADS:-lua sqlite}
SNAP_EVERY=${SNAP_EVERY:-1}
dec=$build/decoder/ktrace-decode
lib=$(find "$build/lib" -name libktrace.a | head -1)
[ -x "$dec" ] && [ -n "$lib" ] || { echo "exclude_twostep: build ktrace first (no ktrace-decode or libktrace.a under $build)" >&2; exit 2; }
[ -f "$PEERBENCH/build.sh" ] || { echo "exclude_twostep: peerbench not found at $PEERBENCH (set PEERBENCH)" >&2; exit 2; }
# shellcheck source=/dev/null
source "$PEERBENCH/build.sh"
# shellcheck source=bench/pb_workload.sh
source "$here/pb_workload.sh"
mkdir -p "$PB_BUILD/log" "$PB_BUILD/bin" "$PB_BUILD/exclude"
out=$PB_BUILD/exclude
bin=$PB_BUILD/bin
PLAN_FILE=$PB_BUILD/log/exclude-plan.txt
: > "$PLAN_FILE"
FL_CC[gcc-fx]=$GCC

# helpers linked into builds, never instrumented
gcc -O2 -I"$src/include" -c "$here/snap_at_end.c" -o "$out/snap_at_end.o" &&
gcc -O2 -c "$PEERBENCH/src/hook_count.c" -o "$out/hook_count.o" || exit 1

declare -A CFLAGS SRCS LIBS ARGS
for wl in $WORKLOADS; do
	pb_workload exclude_twostep "$wl" || exit $?
	# shellcheck disable=SC2086
	for fl in gcc-plain gcc-fi; do plan_set "$wl" "$fl" "${CFLAGS[$wl]}" ${SRCS[$wl]}; done
done
run_compiles

declare -A FLAGS FURTHER VARIANTS
FL_CC[gcc-fy]=$GCC
for wl in $WORKLOADS; do
	set_ok "$wl" gcc-plain && set_ok "$wl" gcc-fi || { echo "exclude_twostep: $wl build failed" >&2; exit 1; }
	link "$bin/$wl.plain" "$GCC" "$(objs "$wl" gcc-plain)" "${LIBS[$wl]}" &&
	link "$bin/$wl.full" "$GCC" "$(objs "$wl" gcc-fi)" "$lib -lpthread ${LIBS[$wl]}" &&
	link "$bin/$wl.count-full" "$GCC" "$(objs "$wl" gcc-fi) $out/hook_count.o" "${LIBS[$wl]}" &&
	link "$bin/$wl.snap" "$GCC" "$(objs "$wl" gcc-fi) $out/snap_at_end.o" \
		"-Wl,--wrap=main $lib -lpthread ${LIBS[$wl]}" || exit 1
	# step 1: trace with default settings, snapshots along the run and at the end
	rm -rf "$out/$wl.snapdir" && mkdir -p "$out/$wl.snapdir"
	(
		cd "$out/$wl.snapdir" || exit 1
		# shellcheck disable=SC2086
		KTRACE_DIR=. KTRACE_QUIET=1 KTRACE_MAX_FILES_PER_MIN=600 "$bin/$wl.snap" ${ARGS[$wl]} >/dev/null &
		pid=$!
		sleep "$SNAP_EVERY"
		while kill -USR2 "$pid" 2>/dev/null; do sleep "$SNAP_EVERY"; done
		wait "$pid"
	) || { echo "exclude_twostep: the traced $wl run failed" >&2; exit 1; }
	# step 2: the flags
	FLAGS[$wl]=$("$dec" --format exclude "$out/$wl.snapdir"/*.ktrace 2>"$out/$wl.notes")
	FURTHER[$wl]=$(sed -n 's/^  to go further: //p' "$out/$wl.notes")
	echo "$wl: $(ls "$out/$wl.snapdir" | wc -l) snapshots, $(grep -o , <<<"${FLAGS[$wl]}" | wc -l | awk '{print $1 + 1}') names to exclude" \
		"(notes: $out/$wl.notes)${FURTHER[$wl]:+; further: $(grep -o , <<<"${FURTHER[$wl]}" | wc -l | awk '{print $1 + 1}') names}"
	FL_FLAGS[gcc-fx]="$OPT -finstrument-functions ${FLAGS[$wl]}"
	# shellcheck disable=SC2086
	plan_set "$wl" gcc-fx "${CFLAGS[$wl]}" ${SRCS[$wl]}
	if [ -n "${FURTHER[$wl]}" ]; then
		FL_FLAGS[gcc-fy]="$OPT -finstrument-functions ${FURTHER[$wl]}"
		# shellcheck disable=SC2086
		plan_set "$wl" gcc-fy "${CFLAGS[$wl]}" ${SRCS[$wl]}
	fi
	run_compiles
done
for wl in $WORKLOADS; do
	set_ok "$wl" gcc-fx || { echo "exclude_twostep: $wl rebuild with the flags failed" >&2; exit 1; }
	link "$bin/$wl.excluded" "$GCC" "$(objs "$wl" gcc-fx)" "$lib -lpthread ${LIBS[$wl]}" &&
	link "$bin/$wl.count-excluded" "$GCC" "$(objs "$wl" gcc-fx) $out/hook_count.o" "${LIBS[$wl]}" || exit 1
	VARIANTS[$wl]="plain full excluded"
	if [ -n "${FURTHER[$wl]}" ] && set_ok "$wl" gcc-fy; then
		link "$bin/$wl.further" "$GCC" "$(objs "$wl" gcc-fy)" "$lib -lpthread ${LIBS[$wl]}" &&
		link "$bin/$wl.count-further" "$GCC" "$(objs "$wl" gcc-fy) $out/hook_count.o" "${LIBS[$wl]}" || exit 1
		VARIANTS[$wl]+=" further"
	fi
done

calls() { # wl variant -> instrumented calls of one run
	# shellcheck disable=SC2086
	PB_COUNT_FILE=$out/count "$bin/$1.count-$2" ${ARGS[$1]} >/dev/null && cut -d' ' -f1 "$out/count"
}
wall() { # wl variant -> seconds (append to $out/t.wl.variant)
	local s e
	s=$(date +%s%N)
	# shellcheck disable=SC2086
	( cd "$out/run" && KTRACE_DIR=. KTRACE_QUIET=1 "$bin/$1.$2" ${ARGS[$1]} >/dev/null )
	e=$(date +%s%N)
	echo "$(( (e - s) / 1000 ))" >> "$out/t.$1.$2"
}
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
mkdir -p "$out/run"
echo
echo "two-step exclusion, $runs interleaved rounds (load before: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '  %-7s %-40s %10s %8s %14s\n' workload build "median s" "x plain" "instr. calls"
for wl in $WORKLOADS; do
	rm -f "$out"/t."$wl".* "$out"/r."$wl".*
	for ((i = 0; i < runs; i++)); do
		read -ra vs <<<"${VARIANTS[$wl]}"
		for ((k = 0; k < ${#vs[@]}; k++)); do wall "$wl" "${vs[(i + k) % ${#vs[@]}]}"; done
		for v in ${VARIANTS[$wl]#plain }; do
			p=$(tail -1 "$out/t.$wl.plain") t=$(tail -1 "$out/t.$wl.$v")
			awk -v p="$p" -v t="$t" 'BEGIN { printf "%.4f\n", t / p }' >> "$out/r.$wl.$v"
		done
	done
	for v in ${VARIANTS[$wl]}; do
		m=$(median < "$out/t.$wl.$v")
		case $v in
		plain) what="uninstrumented"; r=1; c=0 ;;
		full) what="-finstrument-functions + ktrace"; r=$(median < "$out/r.$wl.$v"); c=$(calls "$wl" full) ;;
		excluded) what="rebuilt with the exclude flags + ktrace"; r=$(median < "$out/r.$wl.$v"); c=$(calls "$wl" excluded) ;;
		*) what="... and the offered hot ones + ktrace"; r=$(median < "$out/r.$wl.$v"); c=$(calls "$wl" further) ;;
		esac
		awk -v w="$wl" -v what="$what" -v m="$m" -v r="$r" -v c="$c" \
			'BEGIN { printf "  %-7s %-40s %10.3f %7.2fx %14d\n", w, what, m / 1e6, r, c }'
	done
done
echo "  (ratios: median of the per-round ratios; load after: $(cut -d' ' -f1-3 /proc/loadavg))"
