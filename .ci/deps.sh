#!/usr/bin/env bash
# .ci/deps.sh CALLER [--no-tests] [--fuzz] [--browser] [--perfetto] [--aarch64] - make
# sure the build's Debian packages are here: cmake, a C compiler, make,
# libcmocka-dev, g++ and pkg-config (the C++ example's and installed-use
# tests).  With --fuzz, clang and its libFuzzer runtime; with --browser,
# chromium and python3 for the HTML timeline's browser tests; with
# --perfetto, protobuf-compiler and python3, which the --format perfetto
# tests use to decode and check traces; with --aarch64, the cross compiler,
# qemu-user and arm64 cmocka.  With --no-tests (the demo), only what the
# library, the decoder and the examples need: no cmocka, g++ or pkg-config.  Installs what is missing when run as root
# with apt-get; otherwise prints the install line and exits 2.
# Used by examples/demo.sh, tests/run.sh and test_e2e_html.
set -euo pipefail
caller=${1:?usage: .ci/deps.sh CALLER [--fuzz] [--browser] [--perfetto] [--aarch64]}
fuzz=0 browser=0 perfetto=0 aarch64=0 tests=1
for a in "${@:2}"; do
  case $a in
  --fuzz) fuzz=1 ;;
  --browser) browser=1 ;;
  --perfetto) perfetto=1 ;;
  --aarch64) aarch64=1 ;;
  --no-tests) tests=0 ;;
  *) echo ".ci/deps.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v cc >/dev/null || command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
if [ $tests = 1 ]; then
  [ -f /usr/include/cmocka.h ] || need+=(libcmocka-dev)
  # optional for the build, needed by the C++ example's and installed-use tests
  command -v c++ >/dev/null || need+=(g++)
  command -v pkg-config >/dev/null || need+=(pkg-config)
fi
if [ $browser = 1 ]; then
  command -v chromium >/dev/null || need+=(chromium)
  command -v python3 >/dev/null || need+=(python3)
fi
if [ $perfetto = 1 ]; then
  command -v protoc >/dev/null || need+=(protobuf-compiler)
  command -v python3 >/dev/null || need+=(python3)
fi
if [ $aarch64 = 1 ]; then
  command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
  command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
  if [ ! -f /usr/lib/aarch64-linux-gnu/libcmocka.so ]; then
    if [ "$(id -u)" = 0 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
      dpkg --add-architecture arm64
    fi
    need+=(libcmocka-dev:arm64 libc6:arm64)
  fi
fi
if [ $fuzz = 1 ]; then
  command -v clang >/dev/null || need+=(clang)
  ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
    need+=(libclang-rt-14-dev)
fi
# Optional, never required: tests/run.sh builds with Ninja when it is
# there (a third less time than Make's recursion over the suite's ~200
# small targets).  As root, tried after the rest, and a failure is ignored.
optional_ninja() {
  if [ $tests = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null &&
     ! command -v ninja >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ninja-build >/dev/null 2>&1 || true
  fi
}
if [ ${#need[@]} -eq 0 ]; then
  optional_ninja
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== installing: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  optional_ninja
else
  echo "$caller: missing ${need[*]}; install them with:" >&2
  echo "  sudo apt-get install -y ${need[*]}" >&2
  exit 2
fi
