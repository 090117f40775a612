#!/bin/sh
# budget.sh - what a muted call costs (issue 7): the hot path's loop of
# tiny calls (bench_hotpath) with glibc's empty hooks, with ktrace
# recording every call (KTRACE_FILTER=off), with the calls muted by the
# window budget (default settings: the leaves are hot and short), and with
# them excluded by name (KTRACE_EXCLUDE).  Runs are interleaved, REPS
# rounds; prints the median ns per call of each and its difference and
# ratio to the empty hook, all from this one run.
#
#   bench/budget.sh [BUILD_DIR] [REPS] [CALLS]
set -eu
B=${1:-build}
REPS=${2:-7}
CALLS=${3:-40000000}
H=$B/bench/bench_hotpath
[ -x ${H}_ktrace ] || { echo "build first: cmake --build $B --target bench_hotpath_ktrace bench_hotpath_empty" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
run() { # name, then env assignments, then the binary
	name=$1; shift
	env KTRACE_DIR=$T KTRACE_QUIET=1 BENCH_WARMUP_MS=300 "$@" 1 $CALLS |
		sed -n 's/.*cpu_ns_per_call=\([0-9.]*\).*/\1/p' >> $T/$name
}
i=0
while [ $i -lt $REPS ]; do
	run empty    ${H}_empty
	run recorded KTRACE_FILTER=off ${H}_ktrace
	run muted    ${H}_ktrace
	run excluded 'KTRACE_EXCLUDE=leaf*,work' ${H}_ktrace
	i=$((i + 1))
done
med() { sort -n $T/$1 | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
E=$(med empty)
echo "hot path per call, median of $REPS interleaved runs, $CALLS calls each (load: $(cut -d' ' -f1-3 /proc/loadavg))"
for n in empty recorded muted excluded; do
	m=$(med $n)
	awk -v n=$n -v m=$m -v e=$E 'BEGIN { printf "  %-9s %7.3f ns/call  %+7.3f ns vs empty hook  %5.2fx\n", n, m, m - e, m / e }'
done
