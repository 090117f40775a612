# Cross build for aarch64 with Debian's cross compiler, tests run under
# qemu-user:
#   apt-get install gcc-aarch64-linux-gnu qemu-user   (+ for the tests:
#   dpkg --add-architecture arm64; apt-get update;
#   apt-get install libcmocka-dev:arm64 libc6:arm64)
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#   cmake --build build-arm64 -j2 && (cd build-arm64 && ctest)
# ctest runs each test executable through qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR);
# the end-to-end tests start their traced programs through it too
# (KTRACE_TEST_EMULATOR, set by tests/CMakeLists.txt).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
find_program(KTRACE_CROSS_CXX aarch64-linux-gnu-g++)
if(KTRACE_CROSS_CXX)   # g++-aarch64-linux-gnu: the C++ example and test
  set(CMAKE_CXX_COMPILER ${KTRACE_CROSS_CXX})
else()                 # not the host's g++: no C++ in this build
  set(KTRACE_NO_CXX ON)
endif()
set(KTRACE_CROSS_SYSROOT /usr/aarch64-linux-gnu)
# Libraries from Debian's arm64 multiarch packages (libcmocka-dev:arm64).
set(CMAKE_FIND_ROOT_PATH ${KTRACE_CROSS_SYSROOT} /usr/lib/aarch64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
# The guest's dynamic loader comes from QEMU_LD_PREFIX, and it reads the
# host's /etc/ld.so.cache, which lists the multiarch arm64 libraries once
# libc6:arm64 is installed: then the prefix must be / so that loader and
# libc come from the same package (the cross sysroot's ld.so with the
# multiarch libc.so.6 hangs in pthread_create).  Without libc6:arm64, the
# cross sysroot.
if(EXISTS /lib/ld-linux-aarch64.so.1)
  set(KTRACE_QEMU_LD_PREFIX /)
else()
  set(KTRACE_QEMU_LD_PREFIX ${KTRACE_CROSS_SYSROOT})
endif()
find_program(KTRACE_QEMU_AARCH64 qemu-aarch64)
if(KTRACE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${KTRACE_QEMU_AARCH64} -L ${KTRACE_QEMU_LD_PREFIX})
endif()
