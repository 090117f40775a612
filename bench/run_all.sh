#!/usr/bin/env bash
# run_all.sh - build (if needed) and run every ktrace benchmark, then print
# a compact table.  Figures only: nothing here passes or fails on a timing.
#
#   bench/run_all.sh [--build-dir DIR] [--no-build] [--runs N] [--quick]
#                    [--no-peers] [--no-callgrind]
#
# Defaults: build dir <repo>/build-bench (Release, tests and examples off),
# 7 interleaved runs per figure.  --quick: 3 runs, shorter phases.  The full
# run takes about 4-5 minutes on a 2-core VM.  Raw output of every run is
# kept in $KEEP (default: a temporary directory, removed at exit) - set
# KEEP=/some/dir to look at it afterwards.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-bench
DO_BUILD=1
RUNS=7
QUICK=0
PEERS=1
CALLGRIND=1
while [ $# -gt 0 ]; do
	case $1 in
	--build-dir) BUILD=$2; shift 2 ;;
	--no-build) DO_BUILD=0; shift ;;
	--runs) RUNS=$2; shift 2 ;;
	--quick) QUICK=1; RUNS=3; shift ;;
	--no-peers) PEERS=0; shift ;;
	--no-callgrind) CALLGRIND=0; shift ;;
	-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
	*) echo "run_all.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
BUILD=$(mkdir -p "$BUILD" && cd "$BUILD" && pwd)

if [ $DO_BUILD = 1 ]; then
	if [ ! -f "$BUILD/CMakeCache.txt" ]; then
		cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKTRACE_BUILD_TESTS=OFF \
			-DKTRACE_BUILD_EXAMPLES=OFF -DKTRACE_BUILD_BENCH=ON >/dev/null
	fi
	cmake --build "$BUILD" --target bench-programs -j"$(nproc)" >/dev/null
	# The decoder is optional here: a broken or missing one only skips its row.
	cmake --build "$BUILD" --target ktrace-decode -j"$(nproc)" >/dev/null 2>&1 || true
fi
B=$BUILD/bench
[ -x "$B/bench_hotpath_ktrace" ] || { echo "run_all.sh: no benchmarks in $B (build first)" >&2; exit 1; }
DECODER=""
for d in "$BUILD/decoder/ktrace-decode" "$BUILD/ktrace-decode"; do
	[ -x "$d" ] && { DECODER=$d; break; }
done

if [ -n "${KEEP:-}" ]; then
	OUT=$KEEP; mkdir -p "$OUT"
else
	OUT=$(mktemp -d /tmp/ktrace-bench.XXXXXX)
	trap 'rm -rf "$OUT"' EXIT
fi
SNAPDIR=$OUT/snapshots
mkdir -p "$SNAPDIR"
export KTRACE_DIR=$SNAPDIR KTRACE_QUIET=1

# kv FILE KEY: the values of KEY=... in FILE, one per line.
kv() { grep -o "$2=[^ ]*" "$1" | cut -d= -f2; }
# median: of the numbers on stdin.
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
# range: "min..max" of the numbers on stdin.
range() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f..%.2f", lo, hi}'; }
say() { printf '%s\n' "$*" >&2; }

TABLE=$OUT/table.txt
: >"$TABLE"
row() { printf "$@" | tee -a "$TABLE"; }

row '# ktrace benchmarks  %s  %s  (%s runs, medians)\n' "$(date -u +%FT%TZ)" \
	"$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no git')" "$RUNS"
row '# %s, %s cpus, %s, load average at start %s\n' \
	"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$(nproc)" "$(uname -r)" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"

# ---- 1. hot path ------------------------------------------------------------
# a = none (uninstrumented), empty = glibc no-op hooks, store = floor without
# rdtsc, b = floor, c = ktrace, locked = ktrace with KTRACE_RSEQ=0 (the
# fallback where restartable sequences are unavailable).
HOT_CALLS=12000000
[ $QUICK = 1 ] && HOT_CALLS=6000000
HOT_VARIANTS=(none empty store floor ktrace locked)
hot() { # VARIANT ARGS...
	local v=$1
	shift
	if [ "$v" = locked ]; then
		KTRACE_RSEQ=0 "$B/bench_hotpath_ktrace" "$@"
	else
		"$B/bench_hotpath_$v" "$@"
	fi
}
say "hot path: ${RUNS} rounds x 3 thread counts x ${#HOT_VARIANTS[@]} variants ..."
for t in 1 2 8; do
	for r in $(seq 1 "$RUNS"); do
		# rotate the order each round so no variant always runs first
		for k in $(seq 0 $((${#HOT_VARIANTS[@]} - 1))); do
			v=${HOT_VARIANTS[$(((k + r) % ${#HOT_VARIANTS[@]}))]}
			hot "$v" "$t" "$HOT_CALLS" >"$OUT/hot_${t}_${v}_$r.txt"
		done
		a=$(kv "$OUT/hot_${t}_none_$r.txt" cpu_ns_per_call)
		b=$(kv "$OUT/hot_${t}_floor_$r.txt" cpu_ns_per_call)
		c=$(kv "$OUT/hot_${t}_ktrace_$r.txt" cpu_ns_per_call)
		awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN {printf "%.4f %.4f\n", (c-a)/(b-a), c/b}' \
			>>"$OUT/hot_${t}_ratios.txt"
	done
done
row '\n## 1. Hot path: ns per traced call (= 2 events), CPU time summed over threads / calls\n'
row '%-8s %7s %7s %7s %7s %7s %7s   %-24s %-18s %s\n' threads none empty store floor ktrace locked \
	'(c-a)/(b-a) [range]' 'c/b [range]' 'ktrace wall ns/call'
for t in 1 2 8; do
	m=()
	for v in "${HOT_VARIANTS[@]}"; do
		m+=("$(cat "$OUT"/hot_${t}_${v}_*.txt | kv /dev/stdin cpu_ns_per_call | median)")
	done
	r1=$(cut -d' ' -f1 "$OUT/hot_${t}_ratios.txt" | median)
	r1r=$(cut -d' ' -f1 "$OUT/hot_${t}_ratios.txt" | range)
	r2=$(cut -d' ' -f2 "$OUT/hot_${t}_ratios.txt" | median)
	r2r=$(cut -d' ' -f2 "$OUT/hot_${t}_ratios.txt" | range)
	w=$(cat "$OUT"/hot_${t}_ktrace_*.txt | kv /dev/stdin wall_ns_per_call | median)
	row '%-8s %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f   %-24s %-18s %.2f\n' "$t" "${m[@]}" \
		"$(printf '%.3f [%s]' "$r1" "$r1r")" "$(printf '%.3f [%s]' "$r2" "$r2r")" "$w"
done
row '(none = a: no -finstrument-functions; empty = glibc no-op hooks; store = floor without\n'
row ' rdtsc; floor = b: rdtsc + 4-byte store; ktrace = c; locked = ktrace, KTRACE_RSEQ=0.\n'
row ' Ratios: medians of per-round ratios.  ns per event = half.  Wall: shared VM, other\n'
row ' tenants show there.)\n'

# ---- 1b. larger hot sets ---------------------------------------------------
# A sweep over N distinct functions through a pointer table: 256 and 1024
# fit ktrace's 2048-entry per-thread id cache (the functions are 80 bytes
# apart: 5 entries each), 4096 exceed the 2016 compact ids (full-address
# records).
SWEEP_CALLS=4000000
SWEEP_VARIANTS=(none floor ktrace)
say "hot path, larger hot sets: ${RUNS} rounds x 3 sizes x 3 variants ..."
for n in 256 1024 4096; do
	for r in $(seq 1 "$RUNS"); do
		for k in 0 1 2; do
			v=${SWEEP_VARIANTS[$(((k + r) % 3))]}
			"$B/bench_hotpath_$v" 1 "$SWEEP_CALLS" "$n" >"$OUT/sweep_${n}_${v}_$r.txt"
		done
		a=$(kv "$OUT/sweep_${n}_none_$r.txt" cpu_ns_per_call)
		b=$(kv "$OUT/sweep_${n}_floor_$r.txt" cpu_ns_per_call)
		c=$(kv "$OUT/sweep_${n}_ktrace_$r.txt" cpu_ns_per_call)
		awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN {printf "%.4f %.4f\n", (c-a)/(b-a), c/b}' \
			>>"$OUT/sweep_${n}_ratios.txt"
	done
done
row '\n## 1b. Larger hot sets: 1 thread sweeping N functions (indirect calls), CPU ns per call\n'
row '%-8s %7s %7s %7s   %-24s %s\n' N none floor ktrace '(c-a)/(b-a) [range]' 'c/b'
for n in 256 1024 4096; do
	m=()
	for v in "${SWEEP_VARIANTS[@]}"; do
		m+=("$(cat "$OUT"/sweep_${n}_${v}_*.txt | kv /dev/stdin cpu_ns_per_call | median)")
	done
	r1=$(cut -d' ' -f1 "$OUT/sweep_${n}_ratios.txt" | median)
	r1r=$(cut -d' ' -f1 "$OUT/sweep_${n}_ratios.txt" | range)
	r2=$(cut -d' ' -f2 "$OUT/sweep_${n}_ratios.txt" | median)
	row '%-8s %7.2f %7.2f %7.2f   %-24s %.3f\n' "$n" "${m[@]}" "$(printf '%.3f [%s]' "$r1" "$r1r")" "$r2"
done

# ---- 2. call-heavy program -------------------------------------------------
CH_ITERS=10
[ $QUICK = 1 ] && CH_ITERS=5
VARIANTS=(none empty floor ktrace)
say "call-heavy program: ${RUNS} rounds x 4 variants ..."
for r in $(seq 1 "$RUNS"); do
	for k in 0 1 2 3; do
		v=${VARIANTS[$(((k + r) % 4))]}
		"$B/bench_callheavy_$v" "$CH_ITERS" >"$OUT/ch_${v}_$r.txt"
	done
done
# Calls per iteration: the floor library counts events (difference of two
# iteration counts removes the untimed document generation).
e1=$(FLOOR_REPORT=1 "$B/bench_callheavy_floor" 2 2>&1 >/dev/null | kv /dev/stdin events)
e2=$(FLOOR_REPORT=1 "$B/bench_callheavy_floor" 4 2>&1 >/dev/null | kv /dev/stdin events)
CH_CALLS_PER_ITER=$(((e2 - e1) / 2 / 2))
declare -A CH
for v in "${VARIANTS[@]}"; do
	CH[$v]=$(cat "$OUT"/ch_${v}_*.txt | kv /dev/stdin seconds | median)
done
sums=$(cat "$OUT"/ch_*_*.txt | kv /dev/stdin checksum | sort -u | wc -l)
row '\n## 2. Call-heavy program (JSON-ish parse + hash + merge sort, %s iterations, %s calls/iter)\n' \
	"$CH_ITERS" "$CH_CALLS_PER_ITER"
row '%-8s %10s %10s %12s\n' variant seconds 'x none' 'ns/call add'
for v in "${VARIANTS[@]}"; do
	row '%-8s %10.4f %10.2f %12.2f\n' "$v" "${CH[$v]}" \
		"$(awk -v x="${CH[$v]}" -v a="${CH[none]}" 'BEGIN {print x/a}')" \
		"$(awk -v x="${CH[$v]}" -v a="${CH[none]}" -v n="$CH_CALLS_PER_ITER" -v i="$CH_ITERS" \
			'BEGIN {print (x-a)*1e9/(n*i)}')"
done
row 'ktrace/floor time %.3f   (ktrace-none)/(floor-none) %.3f   checksums agree: %s\n' \
	"$(awk -v c="${CH[ktrace]}" -v b="${CH[floor]}" 'BEGIN {print c/b}')" \
	"$(awk -v c="${CH[ktrace]}" -v b="${CH[floor]}" -v a="${CH[none]}" 'BEGIN {print (c-a)/(b-a)}')" \
	"$([ "$sums" = 1 ] && echo yes || echo NO)"

# ---- 3. peer: uftrace ------------------------------------------------------
if [ $PEERS = 1 ]; then
	say "peers (uftrace) ..."
	row '\n## 3. Peer tracer on the same call-heavy program\n'
	"$ROOT/bench/peers.sh" --build-dir "$BUILD" --iters "$CH_ITERS" \
		--runs "$([ $QUICK = 1 ] && echo 1 || echo 3)" --none-seconds "${CH[none]}" \
		--ktrace-seconds "${CH[ktrace]}" | tee -a "$TABLE"
fi

# ---- 4. request pair -------------------------------------------------------
say "request pair ..."
KTRACE_MAX_SNAPSHOTS_PER_MIN=1 "$B/bench_request_ktrace" 2000000 "$RUNS" >"$OUT/request.txt"
rq() { grep "name=$1 " "$OUT/request.txt" | kv /dev/stdin ns; }
row '\n## 4. Requests (ns, median of %s in-process repetitions)\n' "$RUNS"
row 'two traced calls %.1f | begin/end pair: no threshold %.1f, abs threshold %.1f, p99.9 armed %.1f\n' \
	"$(rq two_traced_calls)" "$(rq request_pair_plain)" "$(rq request_pair_abs)" "$(rq request_pair_pct)"
row 'pair / two traced calls: %.2f\n' \
	"$(awk -v p="$(rq request_pair_plain)" -v c="$(rq two_traced_calls)" 'BEGIN {print p/c}')"
rm -f "$SNAPDIR"/*.ktrace

# ---- 4b. context switches (issue 10) -------------------------------------------
say "context switches ..."
(cd "$SNAPDIR" && "$B/bench_sched_ktrace" 50000 "$RUNS") >"$OUT/sched.txt"
row '\n## 4b. Recording context switches (KTRACE_SCHED): ping-pong through pipes on one cpu\n'
while IFS= read -r l; do row '%s\n' "$l"; done <"$OUT/sched.txt"
rm -f "$SNAPDIR"/*.ktrace

# ---- 5. snapshot stall -------------------------------------------------------
PH_MS=1000
[ $QUICK = 1 ] && PH_MS=500
row '\n## 5. Snapshot stall: ~1 us batches of traced calls; snapshots every 50 ms in S phases\n'
row '%-12s %-10s %9s %8s %8s %9s %10s %8s\n' app_threads phase batches p50_ns p99_ns p99.9_ns max_ns ivcsw
for n in 1 2; do
	say "snapshot stall, $n app thread(s) ..."
	"$B/bench_snapshot_stall_ktrace" "$n" "$PH_MS" 50 2 >"$OUT/stall_$n.txt"
	for ph in quiet snapshots; do
		l=$(grep "name=batch_$ph " "$OUT/stall_$n.txt")
		row '%-12s %-10s %9s %8s %8s %9s %10s %8s\n' "$n" "$ph" \
			"$(kv <(echo "$l") samples)" "$(kv <(echo "$l") p50_ns)" "$(kv <(echo "$l") p99_ns)" \
			"$(kv <(echo "$l") p999_ns)" "$(kv <(echo "$l") max_ns)" "$(kv <(echo "$l") ivcsw)"
	done
	l=$(grep "name=snapshot_write " "$OUT/stall_$n.txt")
	row '  snapshot write: %s snapshots of %s MB, median %s ms, max %s ms (failed: %s)\n' \
		"$(kv <(echo "$l") count)" "$(kv <(echo "$l") file_mb)" "$(kv <(echo "$l") median_ms)" \
		"$(kv <(echo "$l") max_ms)" "$(kv <(echo "$l") failed)"
done
rm -f "$SNAPDIR"/*.ktrace

# ---- 6. decoder --------------------------------------------------------------
row '\n## 6. Decoder throughput\n'
if [ -n "$DECODER" ]; then
	say "decoder ..."
	# A large snapshot (32 MiB rings) and a small one (1 MiB): the difference
	# removes the decoder's fixed cost (start-up, ELF symbols) from the rate.
	KTRACE_BUFFER_MB=32 "$B/bench_mksnap_ktrace" >"$OUT/mksnap.txt"
	KTRACE_BUFFER_MB=1 "$B/bench_mksnap_ktrace" 1000000 >"$OUT/mksnap_small.txt"
	decode_us() { # FILE -> median microseconds of 3 decodes, or "fail"
		local f=$1 r t0 t1
		: >"$OUT/decode_times.txt"
		for r in 1 2 3; do
			t0=$(date +%s%N)
			if ! "$DECODER" --format stats -o /dev/null "$f" >"$OUT/decode_err.txt" 2>&1; then
				echo fail; return
			fi
			t1=$(date +%s%N)
			echo $(((t1 - t0) / 1000)) >>"$OUT/decode_times.txt"
		done
		median <"$OUT/decode_times.txt"
	}
	big=$(kv "$OUT/mksnap.txt" path); bw=$(kv "$OUT/mksnap.txt" words)
	small=$(kv "$OUT/mksnap_small.txt" path); sw=$(kv "$OUT/mksnap_small.txt" words)
	bu=$(decode_us "$big")
	su=$(decode_us "$small")
	if [ "$bu" != fail ] && [ "$su" != fail ]; then
		row 'ktrace-decode --format stats -o /dev/null: %s MB, %s record words in %.3f s = %.1f M words/s\n' \
			"$(kv "$OUT/mksnap.txt" file_mb)" "$bw" "$(awk -v u="$bu" 'BEGIN {print u/1e6}')" \
			"$(awk -v u="$bu" -v w="$bw" 'BEGIN {print w/u}')"
		row '  marginal rate (minus a %s-word snapshot, %.3f s): %.1f M words/s\n' "$sw" \
			"$(awk -v u="$su" 'BEGIN {print u/1e6}')" \
			"$(awk -v bu="$bu" -v su="$su" -v bw="$bw" -v sw="$sw" 'BEGIN {print (bw-sw)/(bu-su)}')"
	else
		row 'ktrace-decode failed: %s\n' "$(head -c 300 "$OUT/decode_err.txt" | tr '\n' ' ')"
	fi
	# Timeline formats on the small snapshot: bytes per call and decode time.
	if "$ROOT/bench/timeline_size.sh" "$DECODER" "$small" 3 >"$OUT/timeline_size.txt" 2>&1; then
		row 'timeline formats (%s, medians of 3):\n' "$(basename "$small")"
		while read -r l; do row '  %s\n' "$l"; done <"$OUT/timeline_size.txt"
	else
		row 'timeline_size.sh failed: %s\n' "$(head -c 300 "$OUT/timeline_size.txt" | tr '\n' ' ')"
	fi
	rm -f "$SNAPDIR"/*.ktrace
else
	row 'skipped: no ktrace-decode in %s\n' "$BUILD"
fi

# ---- 7. instruction counts -------------------------------------------------
if [ $CALLGRIND = 1 ] && command -v valgrind >/dev/null; then
	say "callgrind ..."
	row '\n## 7. Instructions per call (callgrind, difference of two run lengths)\n'
	"$ROOT/bench/callgrind.sh" --build-dir "$BUILD" | tee -a "$TABLE"
fi

row '\n# load average at end %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
say ""
say "table saved in $TABLE$([ -z "${KEEP:-}" ] && echo ' (temporary: set KEEP=dir to keep it)')"
