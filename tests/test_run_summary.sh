#!/usr/bin/env bash
# tests/test_run_summary.sh - the closing lines of tests/run.sh on canned
# steps (tests/run_summary.sh): one line per step, "N passed, N failed",
# the exit status, and ctest's counts read from its log.
set -uo pipefail
. "$(dirname "$0")/run_summary.sh"
fails=0
check() { # what, got, want
  if [ "$2" != "$3" ]; then
    printf 'test_run_summary: %s:\n--- got\n%s\n--- want\n%s\n' "$1" "$2" "$3" >&2
    fails=$((fails + 1))
  fi
}

out=$(printf '%s\n' "plain passed 115 74 0" "asan passed 301 72 0" "tsan passed 250 70 0" \
  "fuzz passed 61 2 0" "aarch64 failed 1012 59 1" | run_summary)
rc=$?
check "lines" "$out" "plain: passed (115 s, 74 tests)
asan: passed (301 s, 72 tests)
tsan: passed (250 s, 70 tests)
fuzz: passed (61 s, 2 tests)
aarch64: FAILED (1012 s, 1 of 60 tests failed)
277 passed, 1 failed"
check "status with a failure" "$rc" 1

out=$(printf '%s\n' "plain passed 90 74 0" "aarch64 skipped 0 0 0" | run_summary)
rc=$?
check "all passed" "$out" "plain: passed (90 s, 74 tests)
aarch64: skipped
74 passed, 0 failed"
check "status when all passed" "$rc" 0

out=$(printf '%s\n' "plain passed 90 74 0" "aarch64 passed 400 60 0 1 passed only when run again alone" |
  run_summary)
rc=$?
check "a step that passed with a note" "$out" "plain: passed (90 s, 74 tests)
aarch64: passed (400 s, 60 tests; 1 passed only when run again alone)
134 passed, 0 failed"
check "status when a step passed with a note" "$rc" 0

out=$(echo "asan failed 40 0 1 the build" | run_summary)
check "a build that failed" "$out" "asan: FAILED (40 s: the build)
0 passed, 1 failed"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf '%s\n' "      Start  1: test_lib_ring" "98% tests passed, 1 tests failed out of 60" \
  "Total Test time (real) = 12.00 sec" >"$log"
check "ctest counts" "$(ctest_counts "$log")" "59 1"
echo "100% tests passed, 0 tests failed out of 74" >"$log"
check "ctest counts, all passed" "$(ctest_counts "$log")" "74 0"
echo "Errors while running CTest" >"$log"
check "ctest did not finish" "$(ctest_counts "$log")" "0 1"
check "ctest_finished, not" "$(ctest_finished "$log" && echo yes || echo no)" "no"
echo "0% tests passed, 1 tests failed out of 1" >"$log"
check "one failed test of one" "$(ctest_counts "$log")" "0 1"
check "ctest_finished, with the same counts" "$(ctest_finished "$log" && echo yes || echo no)" "yes"

[ $fails = 0 ] && echo "test_run_summary: ok"
exit $((fails > 0))
