#!/usr/bin/env bash
# bench/html.sh - size and speed of the HTML timeline (ktrace-decode --format
# html) on a large real snapshot, in headless Chromium.
#
#   bench/html.sh [BUILD_DIR [CALLS]]     (default: build, 5000000 calls)
#   KEEP=1 bench/html.sh ...              keep the snapshot and the page
#
# bench_mksnap_ktrace makes CALLS traced calls (two threads, a recursive
# tree 6 deep) into 64 MiB rings ($KTRACE_BUFFER_MB) and writes one snapshot; the decoder writes
# the page; bench/html_open.py opens it 3 times and prints the median
# figures: bytes per call, decoder time, time to open (navigation start to
# the first frame drawn), frame time over the whole window and while
# panning/zooming.  Needs chromium (apt-get install chromium) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
CALLS=${2:-5000000}
DEC=$(realpath "$BUILD/decoder/ktrace-decode")
MK=$(realpath "$BUILD/bench/bench_mksnap_ktrace")
[ -x "$DEC" ] && [ -x "$MK" ] || { echo "html.sh: build $DEC and $MK first" >&2; exit 2; }
work=$(mktemp -d /tmp/ktrace-html-bench-XXXXXX)
# KEEP=1 keeps the snapshot and the page (the directory is printed).
if [ -n "${KEEP:-}" ]; then echo "files in $work"; else trap 'rm -rf "$work"' EXIT; fi
line=$(cd "$work" && KTRACE_BUFFER_MB=${KTRACE_BUFFER_MB:-64} KTRACE_QUIET=1 KTRACE_DIR="$work" "$MK" $((CALLS / 2)))
snap=$(echo "$line" | sed -n 's/^path=\([^ ]*\) .*/\1/p')
echo "snapshot: $line"
# CPU time too: on a shared machine the wall time is mostly other tenants.
TIMEFORMAT='%R s wall, %U s user + %S s sys'
dt=$( { time "$DEC" --format html -q -o "$work/page.html" "$snap" 2>/dev/null; } 2>&1 )
dt_summary=$( { time "$DEC" -q "$snap" >/dev/null 2>&1; } 2>&1 )
calls=$("$DEC" "$snap" | sed -n 's/^decoded: .* records, \([0-9]*\) calls.*/\1/p')
bytes=$(stat -c %s "$work/page.html")
echo "ktrace-decode --format html: $dt (the summary alone: $dt_summary)"
echo "page: $bytes bytes for $calls calls =" \
  "$(awk "BEGIN{printf \"%.1f\", $bytes / $calls}") bytes/call"
python3 bench/html_open.py "$work/page.html"
