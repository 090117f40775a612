#!/usr/bin/env bash
# bench/lean_bigcode.sh [BUILD_DIR] [ROUNDS] - what the lean mode's
# patching costs a program with a large code segment (bench/lean_bigcode.c:
# 32 MiB of code, a new group of hot functions muted and patched out every
# 100 ms, a second thread timing mmap+touch+munmap rounds).  ROUNDS
# interleaved runs with ktrace off (KTRACE_ENABLE=0) and on; prints the
# medians over the runs of each run's median, 99th percentile and
# largest round, in microseconds.  A figure, never a test.
set -euo pipefail
b=${1:-build}/bench
rounds=${2:-5}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ktrace-bigcode-bench-XXXXXX")
trap 'rm -rf "$dir"' EXIT
declare -A med p99 mx
for ((i = 0; i < rounds; i++)); do
  for r in off on; do
    e=1; [ "$r" = off ] && e=0
    read -r _ _ _ m _ p _ x _ < <(KTRACE_ENABLE=$e KTRACE_DIR=$dir KTRACE_QUIET=1 "$b/bench_lean_bigcode")
    med[$r]="${med[$r]:-} $m"; p99[$r]="${p99[$r]:-} $p"; mx[$r]="${mx[$r]:-} $x"
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf '%-4s %12s %12s %12s   (mmap+touch+munmap of 64 KiB, us; median of %d runs)\n' ktrace median p99 max "$rounds"
for r in off on; do
  printf '%-4s %12.1f %12.1f %12.1f   (each run: %s)\n' "$r" "$(median "${med[$r]}")" \
    "$(median "${p99[$r]}")" "$(median "${mx[$r]}")" "$(tr -s ' ' <<<"${mx[$r]# }")"
done
