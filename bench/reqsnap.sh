#!/usr/bin/env bash
# reqsnap.sh - what a snapshot of a busy request-serving process kept
# (used by redis.sh and busy.sh; usable alone):
#
#   bench/reqsnap.sh DECODER SNAPSHOT PLANTS_LOG [REQUESTS_PER_S]
#
# Prints the window held (the decoder's "window:" line, and whether the
# budget's "window held" is measured or projected), kept requests, events
# and words per kept request, then for each planted slow request in
# PLANTS_LOG (lines "EPOCH_SECONDS KIND FUNCTION [LABEL]": the request of
# kind KIND began at or after EPOCH_SECONDS and runs FUNCTION) whether it
# is in the snapshot whole (its request line without a window-edge flag,
# and FUNCTION called inside it), and the head of --format explain.
set -uo pipefail

dec=$1 snap=$2 plants=$3 rps=${4:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/reqsnap.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$dec" "$snap" > "$tmp/summary" 2>&1
win=$(sed -n 's/^window:.*(\([0-9.]*\) s).*/\1/p' "$tmp/summary" | head -1)
held=$(grep -m1 'window held:' "$tmp/summary" | sed 's/^ *//')
recs=$(awk '/^decoded:/ { print $2; exit }' "$tmp/summary")
reqs=$(sed -n 's/^decoded:.* \([0-9][0-9]*\) requests,.*/\1/p' "$tmp/summary" | head -1)
percore=$(awk '/^rings:/ { print $4; exit }' "$tmp/summary")   # bytes per core
wrapped=$(awk '/^cores:/ { c = 1; next } c && /^ *[0-9]+ / { n++; if ($0 !~ /not wrapped/) w++ }
	/^threads:/ { c = 0 } END { printf "%d %d", w, n }' "$tmp/summary")
# Words in the window: a wrapped core's whole ring, else its events and
# the held records written into it (one word each, extended records count
# as one: a lower bound).
words=$(awk -v b="$percore" '/^cores:/ { c = 1; next } /^threads:/ { c = 0 }
	c && /^ *[0-9]+ / { if ($0 ~ /not wrapped/) { nw++; if ($(NF - 3) ~ /^[0-9]+$/) w += $(NF - 3) } else w += b / 4 }
	/^held:/ { held = $2 }
	END { if (nw) w += held; printf "%.0f", w }' "$tmp/summary")
echo "snapshot: $(basename "$snap")"
echo "  window: ${win:-?} s (decoder's window line; cores wrapped: ${wrapped% *} of ${wrapped#* })"
echo "  ${held:-window held: (no budget line)}"
grep -m1 '^requests:' "$tmp/summary" | sed 's/^/  /'   # format 2 decoders: the REQUESTS section
if [ -n "$reqs" ] && [ "$reqs" -gt 0 ]; then
	awk -v e="$recs" -v r="$reqs" -v wd="$words" -v w="$win" -v rps="$rps" 'BEGIN {
		printf "  kept requests: %d in the window (%.0f per second of window", r, (w > 0 ? r / w : 0)
		if (rps != "")
			printf "; the program averaged %s requests/s", rps
		printf ")\n  events per kept request: %.1f; words per kept request: %.1f (%.0f words in the window)\n",
			e / r, wd / r, wd
	}'
else
	echo "  kept requests: none in the window"
fi

utc() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S.%N; }
ok=0 all=0
while read -r t kind fn label; do
	[ -n "$t" ] || continue
	all=$((all + 1))
	label=${label:-}
	from=$(utc "$t")
	to=$(utc "$(awk -v t="$t" 'BEGIN { printf "%.3f", t + 1.0 }')")
	"$dec" --format text -q --from "$from" --to "$to" "$snap" 2>"$tmp/err" < /dev/null |
		awk -v k="$kind" -v f="$fn" '
			# Requests of the kind, then the next lines of their thread:
			# the planted one is the first whose handler path reaches
			# FUNCTION within a few calls.
			function done_one() { if (line && found && !got) got = line }
			$0 ~ (">> request " k " ") { done_one(); if (got) exit; line = $0; th = $2; n = 0; found = 0; next }
			line && $2 == th && n < 12 { n++; if (index($0, " " f " ")) found = 1 }
			END {
				done_one()
				if (!got) { print "absent"; exit }
				whole = got !~ /\[/
				sub(/^[^ ]+ +/, "", got)
				printf "%s: %s\n", whole ? "whole" : "cut", got
			}' > "$tmp/plant"
	res=$(cat "$tmp/plant")
	grep -q 'outside the snapshot' "$tmp/err" && res="absent (before the window)"
	case $res in whole:*) ok=$((ok + 1)) ;; esac
	printf '  planted %-6s %-22s at %s (%s): %s\n' "$kind" "$fn" "$from" "${label:-}" "$res"
done < "$plants"
[ "$all" -gt 0 ] && echo "  planted slow requests present whole with their function: $ok of $all"

# (head closes the pipe early: under pipefail that is not a failure)
"$dec" --format explain "$snap" 2>/dev/null | sed -n '/^explain:/,/^$/p' | head -6 | sed 's/^/  /' || true
"$dec" --format explain "$snap" 2>/dev/null | sed -n '/where the extra time went/,$p' | head -8 | sed 's/^/  /' || true
