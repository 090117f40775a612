#!/usr/bin/env bash
# tests/install_test.sh BUILD_DIR CC CXX - installed use, outside the tree.
#
# cmake --install BUILD_DIR into a temporary prefix; then a C and a C++
# program (tests/install/) are built against the installed package twice,
# with find_package(ktrace) and with pkg-config, and run: each takes a
# snapshot, which the installed ktrace-decode must decode (demangled C++
# names included).  Checks the package config, the pkg-config file and
# that the headers compile as C++ (extern "C").
set -euo pipefail
build=${1:?usage: install_test.sh BUILD_DIR CC CXX}
cc=${2:-cc}
cxx=${3:-c++}
src=$(cd "$(dirname "$0")/install" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ktrace-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "install_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
dec=$prefix/bin/ktrace-decode
[ -x "$dec" ] || fail "no ktrace-decode in $prefix/bin"
pcdir=$(dirname "$(find "$prefix" -name ktrace.pc | head -1)")
cfgdir=$(dirname "$(find "$prefix" -name ktraceConfig.cmake | head -1)")
[ -d "$pcdir" ] || fail "no ktrace.pc installed"
[ -d "$cfgdir" ] || fail "no ktraceConfig.cmake installed"
libdir=$(dirname "$(find "$prefix" -name 'libktrace.so' | head -1)")

check_run() { # name program
  local out snap
  out=$(cd "$work" && KTRACE_DIR=$work KTRACE_QUIET=1 LD_LIBRARY_PATH=$libdir "$2") ||
    fail "$1: the program failed"
  snap=$(sed -n 's/^snapshot: //p' <<<"$out")
  [ -f "$snap" ] || fail "$1: no snapshot ($out)"
  "$dec" --format stats "$snap" > "$work/$1.stats" 2>/dev/null ||
    fail "$1: installed ktrace-decode failed on $snap"
  grep -q " main$" "$work/$1.stats" || fail "$1: main not in the decoded stats"
  echo "ok: $1"
}

# 1. find_package(ktrace)
cmake -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null ||
  fail "configure with find_package(ktrace) failed"
cmake --build "$work/cmake-build" >/dev/null || fail "build with find_package(ktrace) failed"
check_run cmake-c "$work/cmake-build/app_c"
check_run cmake-cxx "$work/cmake-build/app_cxx"
grep -q "app::boom()" "$work/cmake-cxx.stats" || fail "cmake-cxx: C++ names not demangled"

# 2. pkg-config
export PKG_CONFIG_PATH=$pcdir
command -v pkg-config >/dev/null || fail "pkg-config not installed (apt-get install pkg-config)"
# shellcheck disable=SC2046
"$cc" -o "$work/pc_c" "$src/app.c" $(pkg-config --cflags --libs ktrace) ||
  fail "build with pkg-config (C) failed"
# shellcheck disable=SC2046
"$cxx" -o "$work/pc_cxx" "$src/app.cpp" $(pkg-config --cflags --libs ktrace) ||
  fail "build with pkg-config (C++) failed"
check_run pkgconfig-c "$work/pc_c"
check_run pkgconfig-cxx "$work/pc_cxx"

# 3. the lean mode's flags, where there is one: compiled with them, and
# compiled and linked with them in one step, the program records the same
# calls
lean=$(pkg-config --variable=lean_cflags ktrace)
grep -q '^set(KTRACE_LEAN_CFLAGS "'"${lean// /;}"'")$' "$cfgdir/ktraceConfig.cmake" ||
  fail "ktraceConfig.cmake's KTRACE_LEAN_CFLAGS differs from ktrace.pc's lean_cflags ($lean)"
if [ -n "$lean" ]; then
  # shellcheck disable=SC2046,SC2086
  "$cc" -c -o "$work/lean_c.o" "$src/app.c" $(pkg-config --cflags ktrace) $lean \
    -fno-instrument-functions || fail "compile with lean_cflags failed"
  # shellcheck disable=SC2046
  "$cc" -o "$work/lean_c" "$work/lean_c.o" $(pkg-config --libs ktrace) ||
    fail "link of the lean build failed"
  check_run lean-c "$work/lean_c"
  # in one step: -p reaches the link (gprof's gcrt1.o), and the library
  # keeps gprof's timer and gmon.out off
  rm -f "$work/gmon.out"
  # shellcheck disable=SC2046,SC2086
  "$cc" -o "$work/lean_c1" "$src/app.c" -I"$(pkg-config --variable=includedir ktrace)" $lean \
    $(pkg-config --libs ktrace) || fail "one-step build with lean_cflags failed"
  check_run lean-c-one-step "$work/lean_c1"
  [ ! -e "$work/gmon.out" ] || fail "lean-c-one-step: a gmon.out was written (gprof's start-up ran)"
fi
echo "installed use: all ok ($prefix)"
