#!/usr/bin/env bash
# peers.sh - the call-heavy program under a peer tracer (uftrace), for
# comparison with ktrace.  Not part of the CMake build; needs
# `apt-get install uftrace` (Debian 12: 0.13).
#
#   bench/peers.sh [--build-dir DIR] [--iters N] [--runs N]
#                  [--none-seconds S] [--ktrace-seconds S]
#
# uftrace traces -finstrument-functions programs by preloading libmcount,
# whose __cyg_profile_func_enter/exit take precedence over glibc's no-op
# stubs; bench_callheavy_empty (instrumented, no hook library) is the binary
# it runs.  --no-libcall keeps it to the same events ktrace records (no PLT
# hooking of libc calls).  uftrace writes every event to disk (about 16
# bytes each) where ktrace keeps a window in memory: that difference is the
# point of comparing them, and is part of what is measured.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-bench
ITERS=10
RUNS=3
NONE_S=""
KTRACE_S=""
while [ $# -gt 0 ]; do
	case $1 in
	--build-dir) BUILD=$2; shift 2 ;;
	--iters) ITERS=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	--none-seconds) NONE_S=$2; shift 2 ;;
	--ktrace-seconds) KTRACE_S=$2; shift 2 ;;
	*) echo "peers.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
B=$BUILD/bench
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
secs() { grep -o 'seconds=[^ ]*' | cut -d= -f2; }

if ! command -v uftrace >/dev/null; then
	echo "uftrace: not installed (apt-get install -y uftrace); skipped"
	exit 0
fi
TMP=$(mktemp -d /tmp/ktrace-peers.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

if [ -z "$NONE_S" ]; then
	NONE_S=$(for r in $(seq 1 "$RUNS"); do "$B/bench_callheavy_none" "$ITERS"; done | secs | median)
fi
if [ -z "$KTRACE_S" ]; then
	KTRACE_S=$(for r in $(seq 1 "$RUNS"); do KTRACE_DIR=$TMP KTRACE_QUIET=1 \
		"$B/bench_callheavy_ktrace" "$ITERS"; done | secs | median)
fi

: >"$TMP/uftrace.txt"
for r in $(seq 1 "$RUNS"); do
	rm -rf "$TMP/uftrace.data"
	if ! uftrace record --no-libcall -d "$TMP/uftrace.data" "$B/bench_callheavy_empty" "$ITERS" \
		>"$TMP/out.txt" 2>"$TMP/err.txt"; then
		echo "uftrace record failed: $(head -c 300 "$TMP/err.txt" | tr '\n' ' ')"
		exit 0
	fi
	secs <"$TMP/out.txt" >>"$TMP/uftrace.txt"
	BYTES=$(du -sb "$TMP/uftrace.data" | cut -f1)
done
U=$(median <"$TMP/uftrace.txt")
printf '%-32s %10s %10s %12s\n' tracer seconds 'x none' 'x ktrace'
printf '%-32s %10.4f %10.2f %12.2f\n' "none (uninstrumented)" "$NONE_S" 1 \
	"$(awk -v a="$NONE_S" -v k="$KTRACE_S" 'BEGIN {print a/k}')"
printf '%-32s %10.4f %10.2f %12.2f\n' "ktrace" "$KTRACE_S" \
	"$(awk -v x="$KTRACE_S" -v a="$NONE_S" 'BEGIN {print x/a}')" 1
printf '%-32s %10.4f %10.2f %12.2f\n' "uftrace $(uftrace --version | head -1 | awk '{print $2}') record --no-libcall" "$U" \
	"$(awk -v x="$U" -v a="$NONE_S" 'BEGIN {print x/a}')" \
	"$(awk -v x="$U" -v k="$KTRACE_S" 'BEGIN {print x/k}')"
printf 'uftrace wrote %.0f MB of trace data per run (ktrace: nothing until a snapshot)\n' \
	"$(awk -v b="$BYTES" 'BEGIN {print b/1048576}')"
