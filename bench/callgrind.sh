#!/usr/bin/env bash
# callgrind.sh - instructions per traced call, a figure that does not move
# with the machine's noise: bench_hotpath_<variant> runs under
# `valgrind --tool=callgrind` with two call counts, and the difference of the
# total instruction counts over the difference of calls is the cost of one
# call (start-up, warm-up and exit cancel out).
#
#   bench/callgrind.sh [--build-dir DIR]
#
# Under valgrind the rseq path may or may not be taken (valgrind forwards or
# refuses the rseq registration depending on its version); the script asks
# the program which path ktrace used (BENCH_MODE=1 takes a snapshot and reads
# its info flags) and prints it, and also measures KTRACE_RSEQ=0 (the locked
# fallback) explicitly.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-bench
while [ $# -gt 0 ]; do
	case $1 in
	--build-dir) BUILD=$2; shift 2 ;;
	*) echo "callgrind.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
B=$BUILD/bench
if ! command -v valgrind >/dev/null; then
	echo "valgrind not installed; skipped"
	exit 0
fi
TMP=$(mktemp -d /tmp/ktrace-cg.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
export KTRACE_DIR=$TMP KTRACE_QUIET=1

N1=160000
N2=480000
# ir VARIANT CALLS [ENV...]: total instructions of one run.
ir() {
	local v=$1 n=$2
	shift 2
	env "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$B/bench_hotpath_$v" 1 "$n" 2>&1 >/dev/null | grep -o 'Collected : [0-9]*' | awk '{print $3}'
}
per_call() {
	local v=$1
	shift
	local a b
	a=$(ir "$v" $N1 "$@")
	b=$(ir "$v" $N2 "$@")
	awk -v a="$a" -v b="$b" -v n=$((N2 - N1)) 'BEGIN {printf "%.1f", (b-a)/n}'
}
mode() {
	BENCH_MODE=1 env "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$B/bench_hotpath_ktrace" 1 16000 2>/dev/null | grep -o 'ktrace_mode=[^ ]*' | cut -d= -f2
}

NONE=$(per_call none)
EMPTY=$(per_call empty)
STORE=$(per_call store)
FLOOR=$(per_call floor)
KT=$(per_call ktrace)
KT_MODE=$(mode)
KT0=$(per_call ktrace KTRACE_RSEQ=0)
KT0_MODE=$(mode KTRACE_RSEQ=0)

# vs none: everything -finstrument-functions adds per call (the compiler's
# call sites and the two hooks); hook body: what one hook itself executes
# per event, net of glibc's empty hook (call, ret, PLT jump included there).
line() {
	printf '%-36s %10s %10s %16s\n' "$1" "$2" \
		"$(awk -v x="$2" -v a="$NONE" 'BEGIN {printf "%.1f", x-a}')" \
		"$(awk -v x="$2" -v e="$EMPTY" 'BEGIN {printf "%.1f", (x-e)/2}')"
}
printf '%-36s %10s %10s %16s\n' variant 'instr/call' 'vs none' 'hook body/event'
printf '%-36s %10s %10s %16s\n' "none (uninstrumented)" "$NONE" - -
line "empty (glibc no-op hooks)" "$EMPTY"
line "store (floor without rdtsc)" "$STORE"
line "floor (rdtsc + store)" "$FLOOR"
line "ktrace (append path: $KT_MODE)" "$KT"
line "ktrace KTRACE_RSEQ=0 ($KT0_MODE)" "$KT0"
printf 'ktrace/floor hook body instructions: %s\n' \
	"$(awk -v k="$KT" -v f="$FLOOR" -v e="$EMPTY" 'BEGIN {printf "%.2f", (k-e)/(f-e)}')"
