#!/usr/bin/env bash
# timeline_size.sh - the timeline formats side by side on one snapshot:
# file size per call and decode time for --format chrome and --format
# perfetto, medians of N interleaved runs, and their ratio.  Figures only.
#
#   bench/timeline_size.sh DECODER SNAPSHOT [RUNS]
#
# Prints one line per format and a ratio line, e.g.
#   chrome   calls=1000000 bytes=104000000 bytes_per_call=104.0 decode_s=2.10
#   perfetto calls=1000000 bytes=24000000 bytes_per_call=24.0 decode_s=1.20
#   ratio chrome/perfetto size=4.33 time=1.75
set -euo pipefail
DEC=${1:?usage: timeline_size.sh DECODER SNAPSHOT [RUNS]}
SNAP=${2:?usage: timeline_size.sh DECODER SNAPSHOT [RUNS]}
RUNS=${3:-5}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# Calls decoded (the summary's "decoded: R records, C calls" line).
calls=$("$DEC" "$SNAP" 2>/dev/null | sed -n 's/^decoded: *[0-9]* records, \([0-9]*\) calls.*/\1/p')
[ -n "$calls" ] && [ "$calls" -gt 0 ] || { echo "timeline_size.sh: no calls in $SNAP" >&2; exit 1; }
for r in $(seq 1 "$RUNS"); do
	for f in chrome perfetto; do
		t0=$(date +%s%N)
		"$DEC" -q --format "$f" -o "$TMP/out.$f" "$SNAP"
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000)) >>"$TMP/us.$f"
		stat -c %s "$TMP/out.$f" >>"$TMP/bytes.$f"
	done
done
for f in chrome perfetto; do
	b=$(median <"$TMP/bytes.$f")
	u=$(median <"$TMP/us.$f")
	eval "B_$f=$b U_$f=$u"
	awk -v f="$f" -v c="$calls" -v b="$b" -v u="$u" \
		'BEGIN {printf "%-8s calls=%d bytes=%d bytes_per_call=%.1f decode_s=%.3f\n", f, c, b, b / c, u / 1e6}'
done
awk -v bc="$B_chrome" -v bp="$B_perfetto" -v uc="$U_chrome" -v up="$U_perfetto" \
	'BEGIN {printf "ratio chrome/perfetto size=%.2f time=%.2f\n", bc / bp, uc / up}'
