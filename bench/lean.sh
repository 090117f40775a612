#!/usr/bin/env bash
# bench/lean.sh [BUILD_DIR] [CALLS] [ROUNDS] - the lean mode's per-call
# costs (bench/lean.c): the five builds (the lean floor too), ktrace's recording each call
# (KTRACE_FILTER=off) and muting it (KTRACE_EXCLUDE=small: skipped in the
# hook with -finstrument-functions, patched out to nops in the lean mode),
# ROUNDS interleaved rounds; prints the median ns per call of each and the
# differences that matter.  A figure, never a test.
set -euo pipefail
b=${1:-build}/bench
calls=${2:-20000000}
rounds=${3:-5}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ktrace-lean-bench-XXXXXX")
trap 'rm -rf "$dir"' EXIT
declare -A res
runs="none nop fi-rec fi-muted lean-rec lean-muted lean-floor"
for ((i = 0; i < rounds; i++)); do
  for r in $runs; do
    case $r in
      none) cmd=("$b/bench_lean_none") ;;
      nop) cmd=("$b/bench_lean_nop") ;;
      fi-rec) cmd=(env KTRACE_FILTER=off "$b/bench_lean_fi") ;;
      fi-muted) cmd=(env KTRACE_FILTER=off KTRACE_EXCLUDE=small "$b/bench_lean_fi") ;;
      lean-rec) cmd=(env KTRACE_FILTER=off "$b/bench_lean_lean") ;;
      lean-muted) cmd=(env KTRACE_FILTER=off KTRACE_EXCLUDE=small "$b/bench_lean_lean") ;;
      lean-floor) cmd=("$b/bench_lean_floor") ;;
    esac
    v=$(KTRACE_DIR=$dir KTRACE_QUIET=1 "${cmd[@]}" "$calls" | sed -n 's/^ns\/call //p')
    res[$r]="${res[$r]:-} $v"
  done
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf '%-12s %10s  %s\n' run "ns/call" "(median of $rounds rounds, each the median of 7 reps of $calls calls)"
declare -A m
for r in $runs; do m[$r]=$(med "${res[$r]}"); printf '%-12s %10.3f\n' "$r" "${m[$r]}"; done
awk -v none="${m[none]}" -v nop="${m[nop]}" -v fr="${m[fi-rec]}" -v fm="${m[fi-muted]}" \
    -v lr="${m[lean-rec]}" -v lm="${m[lean-muted]}" -v lf="${m[lean-floor]}" 'BEGIN {
  printf "muted call, lean - nop build:                 %+.3f ns\n", lm - nop
  printf "muted call, -finstrument-functions - none:    %+.3f ns\n", fm - none
  printf "recorded call, lean / -finstrument-functions: %.2fx (%+.3f ns)\n", lr / fr, lr - fr
  printf "nop build - none:                             %+.3f ns\n", nop - none
  printf "recorded call, lean / lean floor:             %.2fx (%+.3f ns)\n", lr / lf, lr - lf
}'
