#!/usr/bin/env bash
# tests/test_run_aarch64.sh - tests/run.sh's aarch64 step beside the
# sanitizer steps (run_aarch64 beside, then arm_finish), with a stand-in
# ctest on PATH: a first pass that passes, one with failures run again
# alone (passing, failing, cut by the time limit), one cut by its time
# limit (run again whole: passing, cut again); the step's time is its
# tests' own, not the sanitizer steps' it waited for; and stop_bg (the run
# ending) stops a ctest that timeout(1) runs in a process group of its
# own.  The functions are taken from tests/run.sh itself; the build is not
# made (get_build's tree recipe is stubbed).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/root/build-tests/aarch64" "$work/root/build-tests/logs"

# The stand-in: FIRST=ok|fail|cut decides the first pass; any later call
# (the pass run again alone) passes, fails one test (AGAIN=fail) or is cut
# (AGAIN=cut).  Its pid goes to STATE/pid.
cat >"$work/bin/ctest" <<'EOF'
#!/usr/bin/env bash
echo $$ >"$STATE/pid"
if [ -f "$STATE/first" ]; then
  echo "again: $*" >>"$STATE/calls"
  case ${AGAIN:-ok} in
  fail) echo "50% tests passed, 1 tests failed out of 2" ;;
  cut) echo "      Start  1: test_lib_ring"; sleep 30 ;;
  *) echo "100% tests passed, 0 tests failed out of ${AGAIN_N:-2}" ;;
  esac
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

# scenario ENV... : the closing summary of one aarch64 step, its seconds
# as N; RAW=1: as printed.  WAIT=S: the sanitizer steps take S seconds
# (arm_finish is called then).  STOP=1: the run ends (stop_bg) once the
# first pass has started; prints whether the stand-in ctest was stopped.
scenario() {
  rm -f "$work/first" "$work/calls" "$work/pid"
  env "$@" STATE="$work" PATH="$work/bin:$PATH" bash -c '
    set -uo pipefail
    ROOT=$1 LOGS=$1/build-tests/logs JOBS=2 AHEAD=0 AHEAD_PID="" arm_pid=""
    STEPS=$(mktemp)
    . "$2/tests/run_summary.sh"
    for f in step get_build arm_ctest run_aarch64 arm_start arm_finish stop_bg; do
      eval "$(sed -n "/^$f() {/,/^}/p" "$2/tests/run.sh")"
    done
    build_tree() { return 0; }
    arm_start >/dev/null
    if [ "${STOP:-0}" = 1 ]; then
      for _ in $(seq 100); do [ -s "$STATE/pid" ] && break; sleep 0.1; done
      stop_bg
      for _ in $(seq 50); do kill -0 "$(cat "$STATE/pid")" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$(cat "$STATE/pid")" 2>/dev/null && echo "ctest still runs" || echo "ctest stopped"
      exit 0
    fi
    sleep "${WAIT:-0}"
    arm_finish >/dev/null
    if [ "${RAW:-0}" = 1 ]; then run_summary <"$STEPS"
    else run_summary <"$STEPS" | sed -E "s/\([0-9]+ s/(N s/"; fi
    rm -f "$STEPS"' _ "$work/root" "$SRC"
}

fails=0
check() { # what, got, want
  if [ "$2" != "$3" ]; then
    printf 'test_run_aarch64: %s:\n--- got\n%s\n--- want\n%s\n' "$1" "$2" "$3" >&2
    fails=$((fails + 1))
  fi
}

export KTRACE_AARCH64_SECONDS=1   # the first pass's limit: 2 s
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

check "failures run again alone, cut by the limit" "$(scenario FIRST=fail AGAIN=cut)" \
  "aarch64: FAILED (N s: run again alone, the tests did not finish within 1 s)
41 passed, 2 failed"

check "a first pass cut by its limit" "$(scenario FIRST=cut AGAIN_N=43)" \
  "aarch64: passed (N s, 43 tests; 43 run again alone: the first pass did not finish within its limit)
43 passed, 0 failed"
check "all of them run again" "$(grep -c -- --rerun-failed "$work/calls")" "0"

check "a first pass cut by its limit, and again" "$(scenario FIRST=cut AGAIN=cut)" \
  "aarch64: FAILED (N s: run again alone, the tests did not finish within 1 s)
0 passed, 1 failed"

# The step's seconds: its tests' (0-2 s here, on a loaded machine), not
# the 8 s it waited for the other steps as well.
secs=$(scenario FIRST=fail WAIT=8 RAW=1 | head -1 | sed -E 's/.*\(([0-9]+) s.*/\1/')
check "the step's time" "$([ "$secs" -lt 8 ] 2>/dev/null && echo under || echo "$secs s")" "under"

check "the run ends during the first pass" \
  "$(scenario FIRST=cut STOP=1 KTRACE_AARCH64_SECONDS=30)" "ctest stopped"

[ $fails = 0 ] && echo "test_run_aarch64: ok"
exit $((fails > 0))
