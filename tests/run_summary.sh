# tests/run_summary.sh - the closing lines of tests/run.sh, sourced by it
# (and by tests/test_run_summary.sh, which feeds it canned steps).
#
# run_summary reads one line per step on stdin:
#
#   NAME STATUS SECONDS PASSED FAILED [WHY...]
#
# STATUS is passed, failed or skipped; PASSED and FAILED count that step's
# tests (ctest's, or one per fuzzer; a build that failed counts as one
# failed test; WHY then says what failed, or for a step that passed, what
# else to know: tests that passed only when run again).  It prints one
# line per step and a closing line, and returns 1 if any step failed:
#
#   plain: passed (115 s, 74 tests)
#   aarch64: passed (400 s, 60 tests; 1 passed only when run again alone)
#   aarch64: FAILED (1012 s, 1 of 60 tests failed)
#   asan: FAILED (40 s: the build)
#   133 passed, 1 failed
run_summary() {
  local name status secs pass fail why tp=0 tf=0 bad=0
  while read -r name status secs pass fail why; do
    [ -n "$name" ] || continue
    tp=$((tp + pass)); tf=$((tf + fail))
    case $status in
    passed) echo "$name: passed ($secs s, $pass tests${why:+; $why})" ;;
    skipped) echo "$name: skipped" ;;
    *)
      bad=1
      if [ -n "$why" ]; then
        echo "$name: FAILED ($secs s: $why)"
      elif [ $((pass + fail)) -gt 0 ]; then
        echo "$name: FAILED ($secs s, $fail of $((pass + fail)) tests failed)"
      else
        echo "$name: FAILED ($secs s)"
      fi
      ;;
    esac
  done
  echo "$tp passed, $tf failed"
  return $bad
}

# ctest's closing counts line: "N% tests passed, F tests failed out of T".
CTEST_COUNTS_RE='^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+'

# ctest_counts LOG: "PASSED FAILED" from ctest's counts line in LOG, or
# "0 1" when there is none (ctest did not finish: a build failure, a time
# limit).
ctest_counts() {
  local line f t
  line=$(grep -E "$CTEST_COUNTS_RE" "$1" | tail -1 || true)
  if [ -z "$line" ]; then
    echo "0 1"
    return
  fi
  f=$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$line")
  t=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  echo "$((t - f)) $f"
}

# ctest_finished LOG: did ctest finish, printing its counts line?  (Its
# "0 1" above is also what one failed test of one says.)
ctest_finished() { grep -qE "$CTEST_COUNTS_RE" "$1"; }
