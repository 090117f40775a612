#!/usr/bin/env bash
# redis.sh - ktrace on a busy Redis: window held, CPU against plain and
# empty-hook builds, requests/s, and planted slow commands found whole.
#
#   REDIS_SRC=/path/to/redis-7.x bench/redis.sh [build-dir-of-ktrace]
#
# Builds Redis three ways from REDIS_SRC (never fetched here: see
# bench/README.md), each once, cached under $REDIS_BUILD (default
# build/redis-bench; a ktrace flavour again for another ktrace tree):
#   plain   -O2
#   empty   -O2 -finstrument-functions, linked with empty
#           __cyg_profile_func_enter/exit (libkthook.so, built here)
#   ktrace  -O2 -finstrument-functions, linked with libktrace; call() wraps
#           the command's proc in ktrace_request_begin/end, kind = the
#           command's full name ("get", "config|get"), by a small edit of
#           src/server.c made here
#   ktracelean  (only if named in FLAVOURS) as ktrace, compiled in the lean
#           mode (lean_cflags of ktrace.pc: x86-64, GCC) instead of
#           -finstrument-functions: muted functions are patched to nops
#   ktraceloop  (only if named in FLAVOURS) as ktrace, and each event-loop
#           iteration (aeMain's aeProcessEvents call) a request of kind
#           "loop" with the commands nested in it: every traced call but
#           aeMain is then inside a request (see patch_loop)
# Then, for each flavour in turn: redis-server pinned to one cpu, Debian's
# redis-benchmark pinned to another, for REDIS_BENCH_SECONDS (150: longer
# than the 120 s window target, KTRACE_WINDOW_S), slow commands planted by
# redis-cli at known times (DEBUG SLEEP, KEYS * over many keys, EVAL with a
# loop), then, for ktrace, a snapshot by SIGUSR2, read with ktrace-decode.
#
# Settings (environment): REDIS_BENCH_SECONDS (150), REDIS_BUILD,
# KTRACE_BUFFER_MB (8), KTRACE_WINDOW_S (120), REDIS_PORT (base, 6390),
# SERVER_CPU (0), CLIENT_CPU (1), BENCH_ARGS (redis-benchmark arguments
# after -p, default "-q -c 50 -P 1 -t set,get,incr,lpush,lpop -r 100000"),
# FLAVOURS ("plain empty ktrace"), KEEP (keep snapshots and logs there).
# Redis's `make` uses MALLOC=libc BUILD_TLS=no: no jemalloc, no OpenSSL.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
kbuild=${1:-${KTRACE_BUILD:-$root/build}}
secs=${REDIS_BENCH_SECONDS:-150}
out=${REDIS_BUILD:-$root/build/redis-bench}
port0=${REDIS_PORT:-6390}
scpu=${SERVER_CPU:-0}
ccpu=${CLIENT_CPU:-1}
flavours=${FLAVOURS:-plain empty ktrace}
bench_args=${BENCH_ARGS:--q -c 50 -P 1 -t set,get,incr,lpush,lpop -r 100000}
window_s=${KTRACE_WINDOW_S:-120}
buffer_mb=${KTRACE_BUFFER_MB:-8}

die() { echo "redis.sh: $*" >&2; exit 1; }

[ -n "${REDIS_SRC:-}" ] || die "set REDIS_SRC to a Redis 7.x source tree (bench/README.md says how to get one)"
[ -f "$REDIS_SRC/src/server.c" ] || die "$REDIS_SRC/src/server.c not found: not a Redis source tree"
grep -q '^    c->cmd->proc(c);$' "$REDIS_SRC/src/server.c" ||
	die "$REDIS_SRC/src/server.c: call() has no line '    c->cmd->proc(c);' (Redis 7.x expected)"
[ -d "$kbuild" ] && kbuild=$(cd "$kbuild" && pwd)
[ -f "$kbuild/lib/libktrace.so" ] || die "no $kbuild/lib/libktrace.so: build ktrace first (cmake --build $kbuild --target ktrace ktrace-decode)"
decode=$kbuild/decoder/ktrace-decode
[ -x "$decode" ] || die "no $decode: cmake --build $kbuild --target ktrace-decode"

if ! command -v redis-benchmark >/dev/null || ! command -v redis-cli >/dev/null; then
	if [ "$(id -u)" = 0 ]; then
		echo "redis.sh: installing redis-tools (redis-benchmark, redis-cli)" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null ||
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null; }
	else
		die "redis-benchmark not found: apt-get install redis-tools"
	fi
fi

mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/redis-bench.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -n "${KEEP:-}" ] && { mkdir -p "$KEEP"; cp -r "$work"/. "$KEEP"/; }
	rm -rf "$work"
}
trap cleanup EXIT

# ---- builds ---------------------------------------------------------------

hook_lib() {
	local d=$out/hook
	[ -f "$d/libkthook.so" ] && return
	mkdir -p "$d"
	cat > "$d/kthook.c" <<'EOF'
/* Empty -finstrument-functions hooks: the cost of the calls alone. */
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *f, void *c) { (void)f; (void)c; }
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *f, void *c) { (void)f; (void)c; }
EOF
	cc -O2 -shared -fPIC -o "$d/libkthook.so" "$d/kthook.c"
}

# The request wrap in call(): begin just before the command runs, end just
# after (nested calls from EVAL/MULTI are nested requests).
patch_call() {
	local f=$1/src/server.c
	grep -q 'ktrace_request_begin' "$f" && return
	awk '
		/^#include "server.h"$/ && !inc { print; print "#include <ktrace.h>"; inc = 1; next }
		/^    c->cmd->proc\(c\);$/ {
			print "    ktrace_request_t kt_req = ktrace_request_begin(c->cmd->fullname);"
			print
			print "    ktrace_request_end(kt_req);"
			next
		}
		{ print }' "$f" > "$f.new"
	mv "$f.new" "$f"
	grep -q 'ktrace_request_end(kt_req)' "$f" || die "could not patch $f"
}

# ktraceloop: also each event-loop iteration (aeMain's aeProcessEvents call)
# as a request of kind "loop", so every traced call of the server but
# aeMain's own is inside a request (the commands are nested in it).  With
# call() alone, the frames around each command (readQueryFromClient,
# writeToClient, beforeSleep...) are outside every request: a held-request
# library still writes them all to the ring.
patch_loop() {
	local f=$1/src/ae.c
	grep -q 'ktrace_request_begin' "$f" && return
	awk '
		/^#include "ae.h"$/ && !inc { print; print "#include <ktrace.h>"; inc = 1; next }
		/^void aeMain\(aeEventLoop \*eventLoop\) \{$/ { inmain = 1 }
		inmain && /^        aeProcessEvents\(eventLoop, AE_ALL_EVENTS\|$/ {
			print "        ktrace_request_t kt_loop = ktrace_request_begin(\"loop\");"
			print; getline; print; getline; print
			print "        ktrace_request_end(kt_loop);"
			inmain = 0
			next
		}
		{ print }' "$f" > "$f.new"
	mv "$f.new" "$f"
	grep -q 'ktrace_request_end(kt_loop)' "$f" || die "could not patch $f"
}

build_flavour() {
	local fl=$1 d=$out/$1 cflags ldflags key=$1 lean=""
	# A ktrace flavour is linked (with an rpath) to the ktrace tree it was
	# built with: a cached one built against another tree would run that
	# tree's library, whatever this run names.  The key says which.
	[ "$fl" = ktracelean ] && lean=$(sed -n 's/^lean_cflags=//p' "$kbuild/lib/ktrace.pc")
	case $fl in ktrace*) key="$fl $kbuild $lean" ;; esac
	if [ -x "$d/src/redis-server" ] && [ -f "$d/.built-ok" ] && [ "$(cat "$d/.built-ok")" = "$key" ]; then
		return
	fi
	[ ! -f "$d/.built-ok" ] || echo "redis.sh: $d was built for '$(cat "$d/.built-ok")' (empty: by an older redis.sh), not '$key': building again" >&2
	echo "redis.sh: building Redis ($fl) in $d (a few minutes)" >&2
	rm -rf "$d"
	mkdir -p "$d"
	(cd "$REDIS_SRC" && tar --exclude=.git -cf - .) | (cd "$d" && tar -xf -)
	case $fl in
	plain) cflags=""; ldflags="" ;;
	empty) hook_lib
	       cflags="-finstrument-functions"
	       ldflags="-L$out/hook -Wl,-rpath,$out/hook -lkthook" ;;
	ktrace|ktraceloop|ktracelean) patch_call "$d"
	       [ "$fl" = ktraceloop ] && patch_loop "$d"
	       cflags="-finstrument-functions -I$root/include"
	       if [ "$fl" = ktracelean ]; then
	           cflags=$lean
	           [ -n "$cflags" ] || die "this build of ktrace has no lean mode (lean_cflags is empty in $kbuild/lib/ktrace.pc: x86-64 and GCC only)"
	           cflags="$cflags -I$root/include"
	       fi
	       ldflags="-L$kbuild/lib -Wl,-rpath,$kbuild/lib -Wl,--no-as-needed -lktrace -Wl,--as-needed -lpthread" ;;
	esac
	# REDIS_CFLAGS/REDIS_LDFLAGS reach Redis's own objects only, not deps/.
	make -C "$d" -j2 MALLOC=libc BUILD_TLS=no OPTIMIZATION=-O2 \
		REDIS_CFLAGS="$cflags" REDIS_LDFLAGS="$ldflags" redis-server \
		> "$d/build.log" 2>&1 || { tail -30 "$d/build.log" >&2; die "build of $fl failed ($d/build.log)"; }
	echo "$key" > "$d/.built-ok"
}

for fl in $flavours; do build_flavour "$fl"; done
[ -n "${REDIS_BUILD_ONLY:-}" ] && { echo "redis.sh: built $flavours under $out"; exit 0; }

# ---- runs -----------------------------------------------------------------

clk_tck=$(getconf CLK_TCK)
cpu_s() {  # utime + stime of a process, seconds
	awk -v t="$clk_tck" '{ sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / t }' "/proc/$1/stat"
}
cmds_done() {
	redis-cli -p "$1" INFO stats | tr -d '\r' | awk -F: '/^total_commands_processed:/ { print $2 }'
}
now_s() { date +%s.%N; }

# plant PORT LOG: the slow commands, at known times before the end of the
# run (so every one falls inside a window of the target length).
plant() {
	local port=$1 log=$2 t0=$3
	local at
	for at in $plants; do
		local due
		due=$(awk -v a="$t0" -v s="$secs" -v b="$at" 'BEGIN { printf "%.3f", a + s - b }')
		while awk -v d="$due" -v n="$(now_s)" 'BEGIN { exit !(n < d) }'; do sleep 0.2; done
		local w
		w=$(now_s)
		redis-cli -p "$port" DEBUG SLEEP 0.05 >/dev/null
		echo "$w debug debugCommand ${at}s-before-end" >> "$log"
		sleep 0.3
		w=$(now_s)
		redis-cli -p "$port" KEYS 'plant:*' | wc -l >/dev/null
		echo "$w keys keysCommand ${at}s-before-end" >> "$log"
		sleep 0.3
		w=$(now_s)
		redis-cli -p "$port" EVAL 'local i = 0 while i < 2000000 do i = i + 1 end return i' 0 >/dev/null
		echo "$w eval evalCommand ${at}s-before-end" >> "$log"
	done
}

# Seconds before the end at which slow commands are planted: spread over
# the target window (the oldest near its start).
plants=${PLANT_AT:-$(awk -v w="$window_s" -v s="$secs" 'BEGIN {
	m = (w < s - 5 ? w : s - 5); printf "%d %d %d", m * 0.9, m * 0.5, 5 }')}

declare -A R_CPU R_RPS R_CPR
run_flavour() {
	local fl=$1 port=$2 d=$out/$1 dir=$work/$1
	mkdir -p "$dir/snap"
	local env=(env)
	if [[ $fl == ktrace* ]]; then
		env+=(KTRACE_DIR="$dir/snap" KTRACE_BUFFER_MB="$buffer_mb" KTRACE_WINDOW_S="$window_s"
		      KTRACE_QUIET=1 KTRACE_TRIGGER_US=0 KTRACE_TRIGGER_PCT=0
		      KTRACE_SIGNAL=RTMIN+2)   # Redis 7.4 takes SIGUSR2 (threads_mngr.c)
	fi
	"${env[@]}" taskset -c "$scpu" "$d/src/redis-server" --port "$port" --bind 127.0.0.1 \
		--save '' --appendonly no --daemonize no --enable-debug-command yes \
		--logfile "$dir/server.log" &
	local spid=$!
	pids+=("$spid")
	for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
	redis-cli -p "$port" PING >/dev/null || die "$fl: redis-server did not start ($dir/server.log)"
	# Many keys for KEYS *: 200k, made server-side (fast).
	redis-cli -p "$port" DEBUG POPULATE 200000 plant >/dev/null
	local c0 n0 t0
	c0=$(cpu_s "$spid"); n0=$(cmds_done "$port"); t0=$(now_s)
	# shellcheck disable=SC2086
	timeout "$secs" taskset -c "$ccpu" redis-benchmark -p "$port" -l $bench_args \
		> "$dir/bench.log" 2>&1 &
	local bpid=$!
	pids+=("$bpid")
	taskset -c "$ccpu" bash -c "$(declare -f plant now_s); secs=$secs plants='$plants'; plant $port '$dir/plants.log' $t0" &
	local ppid=$!
	pids+=("$ppid")
	wait "$bpid" || true
	wait "$ppid" || true
	local c1 n1 t1
	c1=$(cpu_s "$spid"); n1=$(cmds_done "$port"); t1=$(now_s)
	if [[ $fl == ktrace* ]]; then
		kill -s RTMIN+2 "$spid"
		for _ in $(seq 300); do ls "$dir"/snap/*.ktrace >/dev/null 2>&1 && break; sleep 0.1; done
	fi
	redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	R_CPU[$fl]=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')
	R_RPS[$fl]=$(awk -v a="$n0" -v b="$n1" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.0f", (b - a) / (e - s) }')
	R_CPR[$fl]=$(awk -v c="${R_CPU[$fl]}" -v a="$n0" -v b="$n1" 'BEGIN { printf "%.0f", c * 1e9 / (b - a) }')
	echo "$fl: ${secs} s, server cpu ${R_CPU[$fl]} s, ${R_RPS[$fl]} requests/s, ${R_CPR[$fl]} cpu-ns/request"
}

i=0
for fl in $flavours; do
	run_flavour "$fl" $((port0 + i))
	i=$((i + 1))
done

echo
echo "== Redis $(awk -F'"' '/REDIS_VERSION /{print $2}' "$REDIS_SRC/src/version.h"), ${secs} s per flavour, server on cpu $scpu, redis-benchmark on cpu $ccpu ($bench_args)"
printf '%-8s %10s %12s %14s\n' flavour cpu_s requests/s cpu-ns/request
for fl in $flavours; do
	printf '%-8s %10s %12s %14s\n' "$fl" "${R_CPU[$fl]}" "${R_RPS[$fl]}" "${R_CPR[$fl]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }'; }
for kfl in $flavours; do
	[[ $kfl == ktrace* ]] || continue
	echo
	echo "== $kfl"
	[ -n "${R_CPR[plain]:-}" ] && echo "cpu per request, $kfl / plain:      $(ratio "${R_CPR[$kfl]}" "${R_CPR[plain]}")"
	[ -n "${R_CPR[empty]:-}" ] && echo "cpu per request, $kfl / empty-hook: $(ratio "${R_CPR[$kfl]}" "${R_CPR[empty]}")"
	[ -n "${R_CPR[plain]:-}" ] && [ -n "${R_CPR[empty]:-}" ] &&
		echo "cpu per request, empty-hook / plain:  $(ratio "${R_CPR[empty]}" "${R_CPR[plain]}")"
	[ -n "${R_RPS[plain]:-}" ] && echo "requests/s, $kfl / plain:           $(ratio "${R_RPS[$kfl]}" "${R_RPS[plain]}")"
	snap=$(ls "$work/$kfl"/snap/*.ktrace 2>/dev/null | tail -1 || true)
	if [ -z "$snap" ]; then
		echo "$kfl: no snapshot was written"
		exit 1
	fi
	"$decode" "$snap" > "$work/$kfl/summary.txt" 2>&1 || true
	"$decode" --format stats "$snap" > "$work/$kfl/stats.txt" 2>&1 || true
	"$here/reqsnap.sh" "$decode" "$snap" "$work/$kfl/plants.log" "${R_RPS[$kfl]}"
done
