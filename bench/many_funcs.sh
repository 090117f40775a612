#!/usr/bin/env bash
# bench/many_funcs.sh [BUILD_DIR] [ROUNDS] [NFUNCS] [BYTES] - what a
# program with many small functions pays in ktrace's slow paths, in the
# default mode (-finstrument-functions).  Generates NFUNCS (default
# 20000) functions of about BYTES (default 48) bytes each, compiles them
# against BUILD_DIR/lib/libktrace.a, and runs ROUNDS (default 5)
# interleaved rounds of three settings: ktrace off (KTRACE_ENABLE=0), on,
# and on with KTRACE_EXCLUDE set (each function's name then looked up
# once).  The program calls every function once (the first calls: an id,
# a slot in the function table, a name) and then 4 times more (the
# 2016 compact ids are used up: the rest are recorded by address, and
# their calls miss the thread's cache and look the table up).  Prints the
# medians of the first pass and of the later passes, in ms, and the
# later passes' cost per call over ktrace off.  A figure, never a test.
set -euo pipefail
b=$(cd "${1:-build}" && pwd)
rounds=${2:-5}
n=${3:-20000}
bytes=${4:-48}
lib=$b/lib/libktrace.a
[ -f "$lib" ] || { echo "many_funcs.sh: no $lib (build the project first)" >&2; exit 2; }
inc=$(cd "$(dirname "$0")/../include" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/ktrace-manyfuncs-bench-XXXXXX")
trap 'rm -rf "$dir"' EXIT

# each function adds its number to a global; the padding (volatile
# stores) brings it to about BYTES bytes
awk -v n="$n" -v bytes="$bytes" 'BEGIN {
  print "#include <stdio.h>\n#include <time.h>\nvolatile int sink;"
  pad = int((bytes - 32) / 10); if (pad < 0) pad = 0
  for (i = 0; i < n; i++) {
    printf "__attribute__((noinline)) void fn%d(int x) { sink += x + %d;", i, i
    for (k = 0; k < pad; k++) printf " sink = %d;", k
    print " }"
  }
  printf "static void (*const tab[])(int) = {"
  for (i = 0; i < n; i++) printf "%sfn%d", (i ? "," : ""), i
  print "};"
  print "static double ms(struct timespec a, struct timespec b)"
  print "{ return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6; }"
  print "int main(void) {"
  print "  struct timespec a, b, c; unsigned i, r, nt = sizeof(tab) / sizeof(tab[0]);"
  print "  clock_gettime(CLOCK_MONOTONIC, &a);"
  print "  for (i = 0; i < nt; i++) tab[i](i);"
  print "  clock_gettime(CLOCK_MONOTONIC, &b);"
  print "  for (r = 0; r < 4; r++) for (i = 0; i < nt; i++) tab[i](i);"
  print "  clock_gettime(CLOCK_MONOTONIC, &c);"
  print "  printf(\"first %.3f later %.3f\\n\", ms(a, b), ms(b, c));"
  print "  return 0;"
  print "}"
}' > "$dir/many.c"
cc -O1 -finstrument-functions -I"$inc" "$dir/many.c" -o "$dir/many" "$lib" -lpthread -ldl -lm

declare -A first later
for ((i = 0; i < rounds; i++)); do
  for s in off on exclude; do
    case $s in
      off) env=(KTRACE_ENABLE=0) ;;
      on) env=(KTRACE_ENABLE=1) ;;
      exclude) env=("KTRACE_EXCLUDE=nothing_*") ;;
    esac
    read -r _ f _ l < <(env "${env[@]}" KTRACE_DIR="$dir" KTRACE_QUIET=1 "$dir/many")
    first[$s]="${first[$s]:-} $f"; later[$s]="${later[$s]:-} $l"
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
off=$(median "${later[off]}")
printf '%d functions of ~%d bytes, median of %d rounds (ms)\n' "$n" "$bytes" "$rounds"
printf '%-8s %10s %10s %14s\n' ktrace 'first pass' 'later 4' 'ns/later call'
for s in off on exclude; do
  l=$(median "${later[$s]}")
  printf '%-8s %10.2f %10.2f %14.1f\n' "$s" "$(median "${first[$s]}")" "$l" \
    "$(awk -v l="$l" -v o="$off" -v n="$n" 'BEGIN { print (l - o) * 1e6 / (4 * n) }')"
done
