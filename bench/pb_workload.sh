# bench/pb_workload.sh - sourced, after peerbench's build.sh, by the bench
# scripts that build Lua and SQLite from peerbench's sources
# (exclude_twostep.sh, lean_floor.sh).
#
# pb_workload SCRIPT WL sets CFLAGS[WL], SRCS[WL], LIBS[WL] and ARGS[WL]
# (associative arrays the caller declares) for Lua 5.4 (bench.lua
# $LUA_SCALE) or SQLite's speedtest1 (--size $SQLITE_SIZE :memory:), with
# the flags of their own builds.  Returns 1 when the sources cannot be
# prepared, 2 for an unknown workload, saying why (as SCRIPT) on stderr.
# shellcheck shell=bash disable=SC2034,SC2154
pb_workload() {
	local me=$1 wl=$2
	case $wl in
	lua)
		prepare_lua || { echo "$me: no Lua sources (peerbench's mirrors)" >&2; return 1; }
		CFLAGS[lua]="-std=gnu99 -DLUA_COMPAT_5_3 -DLUA_USE_LINUX"
		SRCS[lua]=$LUA_SRCS
		LIBS[lua]="-Wl,-E -lm -ldl"
		ARGS[lua]="$PEERBENCH/lua/bench.lua $LUA_SCALE" ;;
	sqlite)
		prepare_sqlite || { echo "$me: no SQLite sources (peerbench's mirrors, tclsh)" >&2; return 1; }
		CFLAGS[sqlite]="-I$SQLITE_DIR/bld"
		SRCS[sqlite]="$SQLITE_DIR/bld/sqlite3.c $SQLITE_DIR/test/speedtest1.c"
		LIBS[sqlite]="-lpthread -ldl -lm"
		ARGS[sqlite]="--size $SQLITE_SIZE :memory:" ;;
	*) echo "$me: unknown workload $wl (lua, sqlite)" >&2; return 2 ;;
	esac
}
