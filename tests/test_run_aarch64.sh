#!/usr/bin/env bash
# tests/test_run_aarch64.sh - tests/run.sh's aarch64 step beside the
# sanitizer steps (run_aarch64 beside, then arm_finish), with a stand-in
# ctest on PATH: a first pass that passes, one with failures run again
# alone (passing, then failing), and one cut by its time limit.  The two
# functions are taken from tests/run.sh itself; the build is not made
# (get_build's tree recipe is stubbed).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/root/build-tests/aarch64" "$work/root/build-tests/logs"

# The stand-in: FIRST=ok|fail|cut decides the first pass; any later call
# (the pass run again alone) passes, or fails one test with AGAIN=fail.
cat >"$work/bin/ctest" <<'EOF'
#!/usr/bin/env bash
if [ -f "$STATE/first" ]; then
  echo "again: $*" >>"$STATE/calls"
  if [ "${AGAIN:-ok}" = fail ]; then
    echo "50% tests passed, 1 tests failed out of 2"
  else
    echo "100% tests passed, 0 tests failed out of ${AGAIN_N:-2}"
  fi
  exit 0
fi
touch "$STATE/first"
case $FIRST in
ok) echo "100% tests passed, 0 tests failed out of 43" ;;
fail) echo "95% tests passed, 2 tests failed out of 43" ;;
cut) echo "      Start  1: test_lib_ring"; sleep 30 ;;
esac
EOF
chmod +x "$work/bin/ctest"

# scenario ENV... : the closing summary of one aarch64 step
scenario() {
  rm -f "$work/first" "$work/calls"
  env "$@" STATE="$work" PATH="$work/bin:$PATH" KTRACE_AARCH64_SECONDS=1 bash -c '
    set -uo pipefail
    ROOT=$1 LOGS=$1/build-tests/logs JOBS=2 AHEAD=0 AHEAD_PID="" arm_pid=""
    STEPS=$(mktemp)
    . "$2/tests/run_summary.sh"
    for f in step get_build run_aarch64 arm_finish; do
      eval "$(sed -n "/^$f() {/,/^}/p" "$2/tests/run.sh")"
    done
    build_tree() { return 0; }
    arm_t0=$(date +%s)
    set -m
    run_aarch64 beside >"$LOGS/aarch64.console.log" 2>&1 &
    arm_pid=$!
    set +m
    arm_finish >/dev/null
    run_summary <"$STEPS" | sed -E "s/\([0-9]+ s/(N s/"
    rm -f "$STEPS"' _ "$work/root" "$SRC"
}

fails=0
check() { # what, got, want
  if [ "$2" != "$3" ]; then
    printf 'test_run_aarch64: %s:\n--- got\n%s\n--- want\n%s\n' "$1" "$2" "$3" >&2
    fails=$((fails + 1))
  fi
}

check "a first pass that passed" "$(scenario FIRST=ok)" "aarch64: passed (N s, 43 tests)
43 passed, 0 failed"
check "not run again" "$(cat "$work/calls" 2>/dev/null)" ""

check "failures run again alone, passing" "$(scenario FIRST=fail)" \
  "aarch64: passed (N s, 43 tests; 2 passed only when run again alone)
43 passed, 0 failed"
check "only the failed ones run again" "$(grep -c -- --rerun-failed "$work/calls")" "1"

check "failures run again alone, failing" "$(scenario FIRST=fail AGAIN=fail)" \
  "aarch64: FAILED (N s: 1 of 43 tests failed, run alone too)
42 passed, 1 failed"

check "a first pass cut by its limit" "$(scenario FIRST=cut AGAIN_N=43)" \
  "aarch64: passed (N s, 43 tests; 43 run again alone: the first pass did not finish within its limit)
43 passed, 0 failed"
check "all of them run again" "$(grep -c -- --rerun-failed "$work/calls")" "0"

[ $fails = 0 ] && echo "test_run_aarch64: ok"
exit $((fails > 0))
