#!/usr/bin/env bash
# tests/run.sh - build and run the whole test suite.
#
#   tests/run.sh            plain build + ASan/UBSan build + TSan build + a
#                           bounded fuzz run of the snapshot and ELF readers
#   tests/run.sh --quick    plain build only
#   tests/run.sh --aarch64  only the aarch64 step (below)
#
# The full run has an aarch64 step: a cross build (Debian's
# gcc-aarch64-linux-gnu, cmake/aarch64-linux-gnu.cmake) whose unit and
# end-to-end tests run under qemu-aarch64, bounded by KTRACE_AARCH64_SECONDS
# (default 600; twice that beside the sanitizer steps, below); bench and
# fuzz targets are skipped there.  Its tests start at idle priority beside
# the ASan and TSan steps, whose timing-sensitive tests run alone and leave
# a core idle for minutes; a test that fails there (starved while both
# cores are busy) is run again alone at the end, and the step's line in
# the closing summary says how many passed only then.  KTRACE_AARCH64=0 leaves it out.  Builds use Ninja when it is
# installed (.ci/deps.sh installs it as root), Make otherwise; in the full
# run the ASan, TSan, fuzz and aarch64 trees are built at idle priority
# while the plain tests run, once the plain tree has built (build_ahead
# below; if it fails, each step builds its own tree as before).
#
# Installs what it needs on Debian when run as root (cmake, gcc, make,
# libcmocka-dev, protobuf-compiler and python3 for the perfetto tests, clang
# and libclang-rt-14-dev for the fuzz run); otherwise
# says exactly what to install.  Build trees go to build-tests/<config>,
# logs to build-tests/logs/.
#
# A failing step does not stop the others.  The run ends with one line per
# step and a count of the tests of all steps, and exits 1 if any failed:
#
#   plain: passed (115 s, 74 tests)
#   asan: passed (301 s, 72 tests)
#   tsan: passed (250 s, 70 tests)
#   fuzz: passed (61 s, 2 tests)
#   aarch64: FAILED (1012 s, 1 of 60 tests failed)
#   277 passed, 1 failed
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
ONLY_ARM=0
[ "${1:-}" = "--aarch64" ] && ONLY_ARM=1
JOBS=${KTRACE_JOBS:-2}
FUZZ_SECONDS=${KTRACE_FUZZ_SECONDS:-30}

if [ "$QUICK" = 0 ]; then
  "$ROOT/.ci/deps.sh" tests/run.sh --fuzz --browser --perfetto
else
  "$ROOT/.ci/deps.sh" tests/run.sh --browser --perfetto
fi

. "$ROOT/tests/run_summary.sh"
LOGS=$ROOT/build-tests/logs
mkdir -p "$LOGS"
STEPS=$(mktemp)
# The background jobs (the builds made ahead, the aarch64 tests) end with
# the run, however it ends: a second run in this checkout must not meet
# them still building its trees.
# Each runs in its own process group (set -m around its start).
AHEAD_PID="" arm_pid=""
# shellcheck disable=SC2317 # called by the EXIT trap
stop_bg() {
  [ -z "$AHEAD_PID" ] || kill -- -"$AHEAD_PID" 2>/dev/null || true
  [ -z "$arm_pid" ] || kill -- -"$arm_pid" 2>/dev/null || true
  # timeout(1) runs in a process group of its own, which the kills above
  # miss: told to stop, it passes the signal on to its whole group (the
  # aarch64 ctest and the tests under qemu).
  if [ -s "$LOGS/aarch64.tpid" ]; then
    kill -TERM "$(cat "$LOGS/aarch64.tpid")" 2>/dev/null || true
    rm -f "$LOGS/aarch64.tpid"
  fi
}
trap 'stop_bg; rm -f "$STEPS"' EXIT
trap 'exit 130' INT TERM
# step NAME STATUS T0 PASSED FAILED [WHY]: one line for the summary
step() {
  echo "$1 $2 $(($(date +%s) - $3)) $4 $5 ${6:-}" >>"$STEPS"
  echo "== [$1] $2 in $(($(date +%s) - $3)) s"
}

# Ninja when there is one (.ci/deps.sh installs it as root): the plain
# build took 54 s with it, 76 s with Make, on the 2-core VM.  A build tree
# made by the other generator is started afresh (cmake refuses to switch).
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
fresh_tree() { # dir
  local want=${GEN[1]:-Unix Makefiles}
  if [ -f "$1/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$want" "$1/CMakeCache.txt"; then
    rm -rf "$1"
  fi
}

# The configure + build of tree NAME (build-tests/NAME) into
# build-tests/logs/NAME.build.log; its status.  Each tree's recipe is
# here, for the foreground and for the builds made ahead alike; the
# aarch64 one installs its packages first (its log:
# build-tests/logs/aarch64.deps.log), and returns 77 when it cannot.
build_tree() { # name
  local name=$1 dir=$ROOT/build-tests/$1 target="" cc=${CC:-}
  local args=()
  case $name in
  plain) ;;
  asan) args=(-DKTRACE_ASAN=ON -DKTRACE_BUILD_BENCH=OFF -DKTRACE_BUILD_EXAMPLES=OFF) ;;
  tsan) args=(-DKTRACE_TSAN=ON -DKTRACE_BUILD_BENCH=OFF -DKTRACE_BUILD_EXAMPLES=OFF) ;;
  fuzz)
    cc=clang target="ktrace-fuzz-read ktrace-fuzz-elf"
    args=(-DKTRACE_BUILD_FUZZ=ON -DKTRACE_BUILD_BENCH=OFF -DKTRACE_BUILD_EXAMPLES=OFF) ;;
  aarch64)
    "$ROOT/.ci/deps.sh" tests/run.sh --aarch64 >"$LOGS/aarch64.deps.log" 2>&1 || return 77
    args=(-DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" -DKTRACE_BUILD_BENCH=OFF) ;;
  esac
  fresh_tree "$dir"
  env ${cc:+CC=$cc} cmake "${GEN[@]}" -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${args[@]}" \
    >"$LOGS/$name.build.log" 2>&1 &&
    cmake --build "$dir" -j"$JOBS" ${target:+--target $target} >>"$LOGS/$name.build.log" 2>&1
}

# Builds made ahead.  In the full run the later steps' trees (ASan, TSan,
# fuzz, aarch64 with its packages) are built one after another while the
# plain tests run, at idle priority (SCHED_IDLE, or nice 19 where chrt
# cannot set it): they take only cpu time the tests leave, and a test's
# thread that wakes takes the cpu back at once.  The plain step's tests
# run alone at times (RUN_SERIAL), and that left a core idle for minutes:
# the four builds took ~200 s one after the other, in the steps' time
# (1245 s -> 898 s for the whole run with the changes around it; the plain
# and ASan tests took 30 s and 25 s longer beside the builds).
# Each writes its status to build-tests/logs/NAME.build.rc; a step waits
# for its own.
AHEAD=0
# shellcheck disable=SC2317 # called through AFTER_BUILD
build_ahead() {
  local trees=(asan tsan fuzz)
  [ "${KTRACE_AARCH64:-1}" = 0 ] || trees+=(aarch64)
  for n in "${trees[@]}"; do rm -f "$LOGS/$n.build.rc"; done
  set -m   # its own process group: stop_bg ends the whole chain
  (
    chrt -i -p 0 "$BASHPID" >/dev/null 2>&1 || renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
    ionice -c 3 -p "$BASHPID" >/dev/null 2>&1 || true   # and idle for the disk
    for n in "${trees[@]}"; do
      rc=0
      build_tree "$n" || rc=$?
      echo "$rc" >"$LOGS/$n.build.rc"
    done
  ) </dev/null &
  AHEAD=1 AHEAD_PID=$!
  set +m
}

# Build tree NAME now, or wait for the build made ahead: 0, 2 (the aarch64
# packages could not be installed) or 1 (the build failed).
get_build() { # name
  local name=$1 rc=0
  if [ "$AHEAD" = 1 ]; then
    echo "== [$name] build (made ahead, at idle priority)"
    while [ ! -s "$LOGS/$name.build.rc" ] && kill -0 "$AHEAD_PID" 2>/dev/null; do sleep 1; done
    rc=$(cat "$LOGS/$name.build.rc" 2>/dev/null || echo lost)
  else
    echo "== [$name] configure + build"
    build_tree "$name" || rc=$?
  fi
  case $rc in 0) return 0 ;; 77) return 2 ;; *) return 1 ;; esac
}

# A failing step does not stop the others: the closing lines say which
# failed.  Each step's ctest output is also in build-tests/logs/NAME.log.
# AFTER_BUILD: a command run once, after this step's build succeeded.
AFTER_BUILD=""
run_config() { # name
  local name=$1 t0 counts after=$AFTER_BUILD
  local dir=$ROOT/build-tests/$name
  AFTER_BUILD=""   # this step's, whether its build succeeds or not
  t0=$(date +%s)
  if ! get_build "$name"; then
    tail -30 "$LOGS/$name.build.log" 2>/dev/null || true
    step "$name" failed "$t0" 0 1 "the build, see build-tests/logs/$name.build.log"
    return
  fi
  [ -z "$after" ] || $after
  echo "== [$name] ctest"
  (cd "$dir" && ctest --output-on-failure -j"$JOBS" --timeout 600) 2>&1 | tee "$LOGS/$name.log" ||
    true   # counted below
  counts=$(ctest_counts "$LOGS/$name.log")
  # shellcheck disable=SC2086 # two numbers
  step "$name" "$( [ "${counts#* }" = 0 ] && echo passed || echo failed)" "$t0" $counts
}

# The aarch64 ctest in build-tests/aarch64 within LIMIT seconds, its
# output to LOG too; timeout's pid in build-tests/logs/aarch64.tpid while
# it runs (stop_bg).  ctest_counts reads the counts from LOG.
arm_ctest() { # limit log [ctest args]
  local limit=$1 log=$2
  shift 2
  (cd "$ROOT/build-tests/aarch64" && echo "$BASHPID" >"$LOGS/aarch64.tpid" &&
    exec timeout "$limit" ctest --output-on-failure -j"$JOBS" --timeout 300 "$@") 2>&1 |
    tee "$log" || true   # counted by the caller
  rm -f "$LOGS/aarch64.tpid"
}

# The aarch64 tests.  beside: at idle priority, while the sanitizer steps
# run (the closing part of the run waits for it: arm_finish); its first
# pass's counts then go to build-tests/logs/aarch64.first, "PASSED FAILED
# FINISHED SECONDS", and arm_finish runs what did not pass again alone.
run_aarch64() { # [beside]
  local t0 t1 counts rc=0 limit=${KTRACE_AARCH64_SECONDS:-600} how=""
  t0=$(date +%s)
  rm -f "$LOGS/aarch64.first"
  if [ "${1:-}" = beside ]; then
    chrt -i -p 0 "$BASHPID" >/dev/null 2>&1 || renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
    limit=$((limit * 2)) how=", at idle priority beside the sanitizer steps"
  fi
  get_build aarch64 || rc=$?
  if [ "$rc" = 2 ]; then
    tail -5 "$LOGS/aarch64.deps.log" 2>/dev/null || true
    step aarch64 failed "$t0" 0 1 "its tools are missing (.ci/deps.sh --aarch64, see build-tests/logs/aarch64.deps.log)"
    return
  elif [ "$rc" != 0 ]; then
    tail -30 "$LOGS/aarch64.build.log" 2>/dev/null || true
    step aarch64 failed "$t0" 0 1 "the build, see build-tests/logs/aarch64.build.log"
    return
  fi
  echo "== [aarch64] ctest under qemu-aarch64 (limit ${limit}s$how)"
  t1=$(date +%s)
  arm_ctest "$limit" "$LOGS/aarch64.log"
  counts=$(ctest_counts "$LOGS/aarch64.log")
  if [ "${1:-}" = beside ]; then
    echo "$counts $(ctest_finished "$LOGS/aarch64.log" && echo 1 || echo 0) $(($(date +%s) - t1))" \
      >"$LOGS/aarch64.first"
    return
  fi
  # shellcheck disable=SC2086 # two numbers
  step aarch64 "$( [ "${counts#* }" = 0 ] && echo passed || echo failed)" "$t0" $counts
}

# Start the aarch64 tests beside the sanitizer steps, in a job of their own
# (arm_pid: stop_bg ends it), its output in build-tests/logs.
arm_start() {
  echo "== [aarch64] tests started at idle priority beside the sanitizer steps"
  arm_t0=$(date +%s)
  set -m
  run_aarch64 beside </dev/null >"$LOGS/aarch64.console.log" 2>&1 &
  arm_pid=$!
  set +m
}

# The end of the aarch64 step started beside the sanitizer steps: its
# console output, and the tests that failed there run again alone (all of
# them when its first pass did not finish), now that nothing else runs.
# The step's time is its tests' own: the first pass and the one again.
arm_finish() {
  local arm_rc=0 pass fail fin secs again=() counts t1 p f
  local note="passed only when run again alone"
  wait "$arm_pid" || arm_rc=$?
  arm_pid=""
  cat "$LOGS/aarch64.console.log"
  if [ "$arm_rc" != 0 ]; then
    step aarch64 failed "$arm_t0" 0 1 "the step died (status $arm_rc)"
    return
  fi
  [ -s "$LOGS/aarch64.first" ] || return 0   # the build failed: said so
  read -r pass fail fin secs <"$LOGS/aarch64.first"
  if [ "$fail" = 0 ] && [ "$fin" = 1 ]; then
    step aarch64 passed $(($(date +%s) - secs)) "$pass" 0
    return
  fi
  if [ "$fin" = 1 ]; then
    again=(--rerun-failed)
    echo "== [aarch64] $fail of $((pass + fail)) tests failed beside the sanitizer steps: run again alone"
  else
    pass=0 note="run again alone: the first pass did not finish within its limit"
    echo "== [aarch64] the tests did not finish beside the sanitizer steps: run again alone"
  fi
  t1=$(date +%s)
  arm_ctest "${KTRACE_AARCH64_SECONDS:-600}" "$LOGS/aarch64.again.log" "${again[@]}"
  counts=$(ctest_counts "$LOGS/aarch64.again.log")
  p=${counts% *} f=${counts#* }
  t1=$((t1 - secs))   # as if both passes ran back to back, ending now
  if ! ctest_finished "$LOGS/aarch64.again.log"; then
    step aarch64 failed "$t1" "$pass" "$([ "$fin" = 1 ] && echo "$fail" || echo 1)" \
      "run again alone, the tests did not finish within ${KTRACE_AARCH64_SECONDS:-600} s"
  elif [ "$f" = 0 ]; then
    step aarch64 passed "$t1" $((pass + p)) 0 "$p $note"
  else
    step aarch64 failed "$t1" $((pass + p)) "$f" \
      "$f of $((pass + p + f)) tests failed$([ "$fin" = 1 ] && echo ", run alone too")"
  fi
}

finish() {
  echo
  echo "== tests/run.sh: $(( $(date +%s) - start )) s"
  if run_summary <"$STEPS"; then exit 0; else exit 1; fi
}

start=$(date +%s)
if [ "$ONLY_ARM" = 1 ]; then
  run_aarch64
  finish
fi
# the full run: the other trees are built while the plain tests run
[ "$QUICK" = 0 ] && AFTER_BUILD=build_ahead
run_config plain
# The aarch64 tests beside the sanitizer steps (file comment): 97-102 s
# after the TSan step before, beside the fuzz run.  Their console output is
# shown when they end (arm_finish).
[ "$QUICK" = 0 ] && [ "${KTRACE_AARCH64:-1}" != 0 ] && arm_start
if [ "$QUICK" = 0 ]; then
  # halt_on_error/abort: a report fails the test instead of scrolling by.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    run_config asan
  # die_after_fork=0: TSan refuses any thread start in the child of a
  # multithreaded fork; the fork tests start the child's snapshot writer.
  # atexit_sleep_ms: at exit TSan sleeps (1000 ms by default) whenever
  # another thread is alive, so that such threads can still run into the
  # exit path; every traced program has one (the snapshot writer), so the
  # default cost a second per traced process (half of test_e2e_lifecycle's
  # time).  50 ms: a small traced program takes 0.2 s under TSan with it,
  # 0.37 s with 200; test_e2e_lifecycle, whose subject is the exit path,
  # keeps 200 ms, two of the writer's idle wake-ups (tests/CMakeLists.txt).
  TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:atexit_sleep_ms=50} \
    run_config tsan
  # Bounded fuzz runs of the two parsers of untrusted input, seeded with
  # real and synthetic snapshots (and ELF files); a crash fails the run and
  # leaves its input in build-tests/fuzz/ to add to tests/fuzz/regressions.
  dir=$ROOT/build-tests/fuzz
  t0=$(date +%s)
  if ! get_build fuzz; then
    tail -30 "$LOGS/fuzz.build.log" 2>/dev/null || true
    step fuzz failed "$t0" 0 1 "the build, see build-tests/logs/fuzz.build.log"
  else
    rm -f "$dir"/*crash-* "$dir"/*leak-* "$dir"/*timeout-*   # from an earlier run
    # The two fuzzers run side by side, one core each (as each had when they
    # ran one after the other), so the step takes the longer one's time.
    fuzz_pids=()
    for t in read:corpus:$FUZZ_SECONDS elf:corpus-elf:$(( FUZZ_SECONDS / 2 )); do
      IFS=: read -r name corpus secs <<<"$t"
      (
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        cp "$ROOT/tests/fuzz/$corpus"/* "$work"/
        echo "== [fuzz] ktrace-fuzz-$name, ${secs}s"
        "$dir/tests/ktrace-fuzz-$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
          -artifact_prefix="$dir/$name-" -print_final_stats=1 "$work" 2>&1 |
          grep -E "^(stat::number_of_executed_units|#[0-9]+ +DONE|==[0-9]+==ERROR|SUMMARY)" |
          sed "s/^/[fuzz-$name] /" || true
      ) &
      fuzz_pids+=($!)
    done
    wait "${fuzz_pids[@]}"
    fz_pass=0 fz_fail=0
    for name in read elf; do
      # (ls of the three patterns fails when any one is missing: list them)
      found=$(ls "$dir/$name"-crash-* "$dir/$name"-leak-* "$dir/$name"-timeout-* 2>/dev/null ||
        true)
      if [ -n "$found" ]; then
        echo "fuzz: ktrace-fuzz-$name found a failing input: $found" >&2
        fz_fail=$((fz_fail + 1))
      else
        fz_pass=$((fz_pass + 1))
      fi
    done
    step fuzz "$( [ $fz_fail = 0 ] && echo passed || echo failed)" "$t0" $fz_pass $fz_fail
  fi
fi
[ -z "$arm_pid" ] || arm_finish
finish
