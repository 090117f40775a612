#!/usr/bin/env bash
# examples/demo.sh - the README's main command: build ktrace, run the demo
# server (examples/server.c), let its tail-latency trigger catch the planted
# slow request by itself, and print the decoder's explanation of it.
#
#   examples/demo.sh
#
# Installs what is missing on Debian when run as root (cmake, gcc, make);
# otherwise prints the apt-get line to run.  Builds the library, the
# decoder and the server into build/ (RelWithDebInfo, $KTRACE_JOBS jobs,
# default 2; extra cmake arguments from $KTRACE_DEMO_CMAKE_ARGS)
# and writes everything the demo produces to build/demo-out/, emptied first:
#
#   ktrace-<pid>-<time>-<n>.ktrace  the trigger snapshots
#   server.log                      what the server says it did
#   explain.txt                     the explanation printed below
#   timeline.html                   the timeline page: open it in any browser
#   trace.json                      Chrome/Perfetto timeline (ui.perfetto.dev)
#   timeline.txt, stats.txt         text timeline, per-function statistics
#   flame.folded                    folded stacks for flamegraph.pl
#
# Exits non-zero, saying why, if the build fails, the server fails, or no
# trigger snapshot was produced.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build
OUT=$BUILD/demo-out
JOBS=${KTRACE_JOBS:-2}

die() {
	echo "demo.sh: FAILED: $*" >&2
	exit 1
}

# ---- 1. tools -----------------------------------------------------------------
# The demo needs no test framework: only cmake, a C compiler and make.
"$ROOT/.ci/deps.sh" demo.sh --no-tests

# ---- 2. build -------------------------------------------------------------------
# Only the three targets the demo runs (the library, the decoder, the
# server), not the tests and benchmarks: 20-40 s on a fresh 2-core
# machine, a few seconds when build/ is already built.  A new build/ is
# configured without tests and benchmarks; an existing one keeps its
# settings.
t0=$(date +%s)
mkdir -p "$BUILD"
cfg=()
[ -f "$BUILD/CMakeCache.txt" ] || cfg=(-DKTRACE_BUILD_TESTS=OFF -DKTRACE_BUILD_BENCH=OFF)
echo "== building the library, the decoder and the demo server into build/ (-j$JOBS)"
echo "   20-40 s on a fresh 2-core machine, then about 10 s for the demo; log: build/build.log"
# shellcheck disable=SC2086 # KTRACE_DEMO_CMAKE_ARGS is a list of words
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cfg[@]}" ${KTRACE_DEMO_CMAKE_ARGS:-} \
	>"$BUILD/configure.log" 2>&1 ||
	{ tail -40 "$BUILD/configure.log" >&2; die "cmake configure (last lines above; full log build/configure.log)"; }
echo "   configured in $(($(date +%s) - t0)) s"
# Progress: a line at each 10 % of the build, from make's "[ NN%]" lines.
progress() {
	local line p last=-10
	while IFS= read -r line; do
		printf '%s\n' "$line" >>"$BUILD/build.log"
		[[ $line =~ ^\[\ *([0-9]+)%\] ]] || continue
		p=${BASH_REMATCH[1]}
		if [ "$p" -ge $((last + 10)) ]; then
			last=$((p - p % 10))
			printf '   %3d%%  %3d s\n' "$p" $(($(date +%s) - t0))
		fi
	done
}
: >"$BUILD/build.log"
set +o pipefail
cmake --build "$BUILD" -j"$JOBS" --target ktrace ktrace-decode ktrace-example-server 2>&1 | progress
rc=${PIPESTATUS[0]}
set -o pipefail
[ "$rc" = 0 ] || { tail -40 "$BUILD/build.log" >&2; die "build (last lines above; full log build/build.log)"; }
echo "   built in $(($(date +%s) - t0)) s"
SERVER=$BUILD/examples/ktrace-example-server
DECODE=$BUILD/decoder/ktrace-decode
[ -x "$SERVER" ] || die "$SERVER was not built (KTRACE_BUILD_EXAMPLES=OFF in build/CMakeCache.txt?)"
[ -x "$DECODE" ] || die "$DECODE was not built"

# ---- 3. run the server ------------------------------------------------------------
rm -rf "$OUT"
mkdir -p "$OUT"
t1=$(date +%s)
echo
echo "== running the demo server (examples/server.c) for about 6 s, KTRACE_DIR=build/demo-out"
echo "   3 workers serve get/put/scan requests; a put slower than 10 ms fires a snapshot"
# Settings from the caller's environment would change what the demo shows.
unset KTRACE_ENABLE KTRACE_TRIGGER_US KTRACE_TRIGGER_PCT KTRACE_TRIGGER_MIN_SAMPLES \
	KTRACE_TRIGGER_DELAY_MS KTRACE_MAX_SNAPSHOTS_PER_MIN KTRACE_BUFFER_MB KTRACE_SIGNAL
rc=0
KTRACE_DIR=$OUT "$SERVER" >"$OUT/server.log" 2>"$OUT/server.err" || rc=$?
if [ $rc != 0 ]; then
	cat "$OUT/server.log" "$OUT/server.err" >&2
	die "the server exited with status $rc"
fi
sed 's/^/   /' "$OUT/server.log"
sed 's/^/   /' "$OUT/server.err"

# ---- 4. the trigger snapshot ---------------------------------------------------------
shopt -s nullglob
snaps=("$OUT"/ktrace-*.ktrace)
shopt -u nullglob
[ ${#snaps[@]} -gt 0 ] || die "no snapshot in build/demo-out: the trigger did not fire (server.log above)"
snap=
for f in "${snaps[@]}"; do # oldest first (names sort by time)
	# grep reads to the end: with -q it could exit at the match and the
	# decoder, still writing, die of SIGPIPE (pipefail: no match).
	if "$DECODE" "$f" 2>/dev/null | grep "^reason: *trigger:" >/dev/null; then
		snap=$f
		break
	fi
done
[ -n "$snap" ] || die "none of ${#snaps[@]} snapshot(s) in build/demo-out was written by a trigger"
rel=${snap#"$ROOT"/}

# ---- 5. decode ---------------------------------------------------------------------------
echo
echo "== ktrace-decode --format explain $rel"
echo
"$DECODE" --format explain -o "$OUT/explain.txt" "$snap" ||
	die "ktrace-decode --format explain failed"
cat "$OUT/explain.txt"
echo
echo "== writing the timelines"
"$DECODE" --format html -q -o "$OUT/timeline.html" "$snap" || die "html output failed"
"$DECODE" --format chrome -q -o "$OUT/trace.json" "$snap" || die "chrome output failed"
"$DECODE" --format text -o "$OUT/timeline.txt" "$snap" || die "text output failed"
"$DECODE" --format stats -o "$OUT/stats.txt" "$snap" || die "stats output failed"
"$DECODE" --format folded -q -o "$OUT/flame.folded" "$snap" || die "folded output failed"

size() { du -h "$1" | cut -f1; }
# "  trigger: "put" request #N on worker-2/1234 at ..." -> worker-2/1234
on=$(sed -n 's/^  trigger: .* request #[0-9]* on \([^ ]*\) at .*/\1/p' "$OUT/explain.txt" | sed -n 1p)
cat <<EOF

== done in $(($(date +%s) - t1)) s after the build.  Files in build/demo-out/:
   $(basename "$snap")   the trigger snapshot (${#snaps[@]} written)
   explain.txt    the explanation above
   timeline.html  the whole window in one page ($(size "$OUT/timeline.html")), no network needed:
                  open build/demo-out/timeline.html in any browser (xdg-open on a Linux
                  desktop), or mail it.  Press "Go to the slow request": the red "put" bar on
                  ${on:-its worker}'s requests row, compact_log under it.
   trace.json     timeline for Perfetto ($(size "$OUT/trace.json")): open https://ui.perfetto.dev,
                  choose "Open trace file" and pick build/demo-out/trace.json (works offline;
                  chrome://tracing opens it too).  The slow put is the "put" slice on
                  ${on:-its worker}'s row, under the "TRIGGER: slow put request" marker.
   timeline.txt   every call, time-ordered ($(size "$OUT/timeline.txt")): less build/demo-out/timeline.txt
   stats.txt      per-function calls, total/self time, percentiles
   flame.folded   folded stacks: flamegraph.pl build/demo-out/flame.folded > flame.svg

   Decode any snapshot yourself:  build/decoder/ktrace-decode --format explain $rel
EOF
