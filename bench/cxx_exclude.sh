#!/usr/bin/env bash
# bench/cxx_exclude.sh [BUILD] [ROUNDS] - what leaving header-only code out
# of the instrumentation saves, on the C++ example.
#
# Runs ktrace-example-shapes (every function instrumented, the standard
# library's inline templates included) and ktrace-example-shapes-lean
# (-finstrument-functions-exclude-file-list=/usr/include) 5 times each,
# alternating, and prints the median wall time of each, their ratio, and the
# events each records (records in the snapshot window: the ring may have wrapped).
set -euo pipefail
build=${1:-build}
rounds=${2:-20000}
dec=$build/decoder/ktrace-decode
for p in shapes shapes-lean; do
  [ -x "$build/examples/ktrace-example-$p" ] || {
    echo "cxx_exclude: $build/examples/ktrace-example-$p missing (needs a C++ compiler; build first)" >&2
    exit 2
  }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() { # prog -> seconds
  local s e
  s=$(date +%s%N)
  KTRACE_DIR=$dir KTRACE_QUIET=1 "$build/examples/ktrace-example-$1" "$rounds" >/dev/null
  e=$(date +%s%N)
  echo $(( (e - s) / 1000 ))
}
declare -A t
for i in 1 2 3 4 5; do
  for p in shapes shapes-lean; do t[$p]+="$(run $p) "; done
done
median() { tr ' ' '\n' | grep . | sort -n | sed -n 3p; }
full=$(echo "${t[shapes]}" | median)
lean=$(echo "${t[shapes-lean]}" | median)
events() { # events recorded by the last run of prog (its snapshot's summary)
  KTRACE_DIR=$dir KTRACE_QUIET=1 "$build/examples/ktrace-example-$1" "$rounds" |
    sed -n 's/^snapshot: //p' | xargs "$dec" 2>/dev/null | awk '/^decoded:/ {print $2}'
}
echo "C++ example, $rounds rounds x 2 threads, median of 5 runs (wall time, us):"
printf '  %-42s %10s us  %10s records in the window\n' "all code instrumented" "$full" "$(events shapes)"
printf '  %-42s %10s us  %10s records in the window\n' "exclude-file-list=/usr/include" "$lean" "$(events shapes-lean)"
awk -v a="$full" -v b="$lean" 'BEGIN { printf "  ratio all / excluded: %.2fx\n", a / b }'
