# End-to-end, stress, lifecycle and file-fault tests of the library: traced
# helper programs under tests/e2e/ run as child processes with KTRACE_DIR
# set to a fresh directory; their snapshots are checked with the decoder
# library (decoder.h) and the real ktrace-decode, against what the program
# knows it did.  Labels: e2e, threads, stress, lifecycle, faults, trigger.
set(KT_E2E_DIR ${CMAKE_CURRENT_LIST_DIR}/e2e)

add_library(ktest_dec STATIC ${KT_E2E_DIR}/kdec.c)
target_compile_definitions(ktest_dec PRIVATE _GNU_SOURCE)
target_compile_options(ktest_dec PRIVATE -Wall -Wextra)
target_link_libraries(ktest_dec PUBLIC ktrace_decoder ktest_util)

# ktrace_test_program(name SOURCES ... [STATIC] [PLAIN] [LINK ...])
#   a helper program linked to libktrace (shared, or static with STATIC),
#   built with -finstrument-functions -O1 unless PLAIN.
function(ktrace_test_program name)
  cmake_parse_arguments(P "STATIC;PLAIN" "" "SOURCES;LINK;OPTIONS" ${ARGN})
  add_executable(${name} ${P_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE
    KTRACE_TEST_BINARY_DIR="${CMAKE_CURRENT_BINARY_DIR}")
  target_compile_options(${name} PRIVATE -Wall -Wextra -O1 -g ${P_OPTIONS})
  if(NOT P_PLAIN)
    target_compile_options(${name} PRIVATE -finstrument-functions)
  endif()
  if(P_STATIC)
    target_link_libraries(${name} PRIVATE ktrace_static)
  else()
    target_link_libraries(${name} PRIVATE ktrace)
  endif()
  # Linked exactly as an application would (test_lib_link_plain checks the
  # documented command line itself).
  target_link_libraries(${name} PRIVATE ${P_LINK} Threads::Threads)
endfunction()

ktrace_test_program(e2e_calls SOURCES ${KT_E2E_DIR}/traced_calls.c)
ktrace_test_program(e2e_calls_static SOURCES ${KT_E2E_DIR}/traced_calls.c STATIC)

# ktrace_e2e_test(name PROGRAMS ... LABELS ...)
function(ktrace_e2e_test name)
  cmake_parse_arguments(E "" "" "PROGRAMS;LABELS" ${ARGN})
  add_cmocka_test(test_e2e_${name}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_e2e_${name}.c
    LINK ktest_dec
    LABELS e2e ${E_LABELS})
  if(E_PROGRAMS)
    add_dependencies(test_e2e_${name} ${E_PROGRAMS} ktrace-decode)
  endif()
endfunction()

ktrace_e2e_test(calls PROGRAMS e2e_calls e2e_calls_static LABELS threads)
# Again with glibc's rseq registration off (as on glibc < 2.35): the traced
# programs run on the library's own registration.
add_test(NAME test_e2e_calls_glibc_rseq0 COMMAND test_e2e_calls)
set_tests_properties(test_e2e_calls_glibc_rseq0 PROPERTIES TIMEOUT 300 LABELS "e2e;threads"
  ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout;GLIBC_TUNABLES=glibc.pthread.rseq=0")

ktrace_test_program(e2e_manual SOURCES ${KT_E2E_DIR}/manual_prog.c PLAIN)
ktrace_e2e_test(manual PROGRAMS e2e_manual LABELS threads)
ktrace_e2e_test(files PROGRAMS e2e_calls LABELS faults)

# Lifecycle: fork, exec, dlopen, exit during a snapshot, signals.
ktrace_test_program(e2e_life SOURCES ${KT_E2E_DIR}/lifecycle_prog.c ${KT_E2E_DIR}/slow_phdr.c
  LINK ${CMAKE_DL_LIBS} OPTIONS -Wno-prio-ctor-dtor)
ktrace_test_program(e2e_life_static SOURCES ${KT_E2E_DIR}/lifecycle_prog.c STATIC
  LINK ${CMAKE_DL_LIBS} OPTIONS -Wno-prio-ctor-dtor)
add_library(e2e_plugin SHARED ${KT_E2E_DIR}/plugin.c)
target_compile_options(e2e_plugin PRIVATE -finstrument-functions -O1 -g)
ktrace_e2e_test(lifecycle PROGRAMS e2e_life e2e_life_static e2e_plugin LABELS lifecycle threads)

# Tail-latency triggers.
ktrace_test_program(e2e_trigger SOURCES ${KT_E2E_DIR}/trigger_prog.c)
ktrace_e2e_test(trigger PROGRAMS e2e_trigger LABELS trigger)
# KTRACE_TRIGGER_ON=run: triggers on what the request did, not preemption.
ktrace_test_program(e2e_trigger_run SOURCES ${KT_E2E_DIR}/trigger_run_prog.c)
ktrace_e2e_test(trigger_run PROGRAMS e2e_trigger_run LABELS trigger sched)

# A busy service (examples/busy_server.c): planted slow requests whole and
# the REQUESTS section against the program's own counts.  Its assertions
# need the format 2 library; on a snapshot without REQUESTS it skips.
ktrace_test_program(e2e_busy SOURCES ${PROJECT_SOURCE_DIR}/examples/busy_server.c)
ktrace_e2e_test(busy PROGRAMS e2e_busy LABELS requests)

# Stress: threads coming and going, snapshots by API and signal, small ring.
ktrace_test_program(e2e_stress SOURCES ${KT_E2E_DIR}/stress_prog.c)
ktrace_e2e_test(stress PROGRAMS e2e_stress LABELS stress threads)

# The HTML timeline in headless Chromium (tests/html/pagecheck.py).
ktrace_e2e_test(html PROGRAMS e2e_calls e2e_trigger LABELS html)

# Timing-sensitive tests (thresholds in ms on a 2-core machine; signal
# delivery under TSan) run alone: they must not share the cpus with the
# stress test, which saturates both.
set_tests_properties(test_e2e_trigger test_e2e_stress test_e2e_lifecycle PROPERTIES RUN_SERIAL TRUE)

# The decoder on real snapshots (issue 11): longjmp out of 50 traced frames
# (closed as "exit lost"), the executable's path turned into a FIFO.
ktrace_test_program(e2e_longjmp SOURCES ${KT_E2E_DIR}/longjmp_prog.c)
ktrace_e2e_test(harden PROGRAMS e2e_longjmp)
# --format perfetto through protoc and tests/perfetto/check_pftrace.py
# (needs protobuf-compiler and python3: .ci/deps.sh CALLER --perfetto).
ktrace_e2e_test(perfetto PROGRAMS e2e_calls LABELS perfetto)
# The window budget (issue 7): muting under pressure, bursts, long calls,
# KTRACE_EXCLUDE/INCLUDE on static and shared-library functions, off.
add_library(e2e_budget_lib SHARED ${KT_E2E_DIR}/budget_lib.c)
target_compile_options(e2e_budget_lib PRIVATE -finstrument-functions -O1 -g)
ktrace_test_program(e2e_budget SOURCES ${KT_E2E_DIR}/budget_prog.c LINK e2e_budget_lib)
ktrace_e2e_test(budget PROGRAMS e2e_budget LABELS threads)
set_tests_properties(test_e2e_budget PROPERTIES RUN_SERIAL TRUE)
# The two-step way to near-zero overhead (issue 7): the test compiles
# e2e/exclude_prog.c itself, before and after `ktrace-decode --format exclude`.
set(KT_EXCL_SAN "")
if(KTRACE_ASAN)
  set(KT_EXCL_SAN "-fsanitize=address,undefined")
elseif(KTRACE_TSAN)
  set(KT_EXCL_SAN "-fsanitize=thread")
endif()
ktrace_e2e_test(exclude PROGRAMS ktrace_static)
target_compile_definitions(test_e2e_exclude PRIVATE KT_CC="${CMAKE_C_COMPILER}"
  KT_EXCL_SRC="${KT_E2E_DIR}/exclude_prog.c" KT_INCLUDE="${PROJECT_SOURCE_DIR}/include"
  KT_LIBKTRACE="$<TARGET_FILE:ktrace_static>" KT_SAN_FLAGS="${KT_EXCL_SAN}")
set_tests_properties(test_e2e_exclude PROPERTIES RUN_SERIAL TRUE)
# Scheduling (issue 10): context switches from perf_event_open.  Static, so
# a constructor can start a thread before libktrace's; noperf runs a
# program where perf_event_open fails with EACCES (seccomp).
ktrace_test_program(e2e_sched SOURCES ${KT_E2E_DIR}/sched_prog.c STATIC
  OPTIONS -Wno-prio-ctor-dtor)
add_executable(e2e_noperf ${KT_E2E_DIR}/noperf.c)
ktrace_e2e_test(sched PROGRAMS e2e_sched e2e_noperf LABELS threads lifecycle)
set_tests_properties(test_e2e_sched PROPERTIES RUN_SERIAL TRUE)
# Hardening (issue 11): descriptors, setuid, RLIMIT_AS, signal floods,
# daemon(), taken names, full 64 MiB rings under load, exit under signals.
ktrace_test_program(e2e_hostile SOURCES ${KT_E2E_DIR}/harden_prog.c OPTIONS -Wno-prio-ctor-dtor)
ktrace_test_program(e2e_hostile_static SOURCES ${KT_E2E_DIR}/harden_prog.c STATIC
  OPTIONS -Wno-prio-ctor-dtor)
ktrace_e2e_test(hostile PROGRAMS e2e_hostile e2e_hostile_static LABELS faults threads)
# Measures the writer's idle cpu and copies a ring against two busy threads.
set_tests_properties(test_e2e_hostile PROPERTIES RUN_SERIAL TRUE)
# C++: the example under examples/shapes.cpp (built when a C++ compiler is
# found): counts, exception nesting, demangled names.
if(TARGET ktrace-example-shapes)
  ktrace_e2e_test(cxx PROGRAMS ktrace-example-shapes LABELS threads)
  target_compile_definitions(test_e2e_cxx PRIVATE
    KTRACE_EXAMPLE_SHAPES_PATH="$<TARGET_FILE:ktrace-example-shapes>")
endif()

# Installed use: cmake --install into a temporary prefix, then a C and a C++
# program outside the tree built with find_package(ktrace) and with
# pkg-config, run, and their snapshots decoded by the installed decoder.
# (Not in sanitizer builds: the installed library would need the
# sanitizer runtime in every program.)
if(TARGET ktrace-example-shapes AND NOT CMAKE_CROSSCOMPILING AND NOT KTRACE_ASAN AND NOT KTRACE_TSAN)
  add_test(NAME test_e2e_install
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install_test.sh ${CMAKE_BINARY_DIR}
            ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER})
  set_tests_properties(test_e2e_install PROPERTIES LABELS e2e TIMEOUT 300)
endif()
# Time-range selection (issue 8): --from/--to/--around-trigger/--min-dur on
# a program that knows when each of its steps ran.
ktrace_test_program(e2e_range SOURCES ${KT_E2E_DIR}/range_prog.c)
ktrace_e2e_test(range PROGRAMS e2e_range)
# Exact cuts: --from/--to at many points, nesting and order in text, chrome
# and perfetto; explain names the trigger only when it is wholly in the range.
ktrace_e2e_test(cut PROGRAMS e2e_range)
# Several files on one timeline (issue 8): processes talking over a pipe,
# overlapping snapshots of one process, in text, chrome and summary.
ktrace_e2e_test(merge PROGRAMS e2e_calls)

# Requests held aside (lib/request.c), on the raw records.
ktrace_test_program(e2e_request SOURCES ${KT_E2E_DIR}/request_prog.c)
ktrace_e2e_test(requests PROGRAMS e2e_request LABELS threads)
# Environments production programs run in (issue 19): seccomp sandboxes,
# small thread stacks, a stalled stderr, 8 KiB alternate signal stacks, the
# snapshot signal taken over, RLIMIT_NPROC.  e2e_launch sets up what must
# exist before the program starts (a filter, limits, another uid).
ktrace_test_program(e2e_hostenv SOURCES ${KT_E2E_DIR}/hostenv_prog.c LINK ${CMAKE_DL_LIBS})
ktrace_test_program(e2e_hostenv_mlock SOURCES ${KT_E2E_DIR}/hostenv_prog.c
  LINK ${CMAKE_DL_LIBS} OPTIONS -DHOSTENV_MLOCK)
# Static: can reach the library's hidden test offset of the wall clock.
ktrace_test_program(e2e_hostenv_static SOURCES ${KT_E2E_DIR}/hostenv_prog.c STATIC
  LINK ${CMAKE_DL_LIBS} OPTIONS -DHOSTENV_STATIC)
add_executable(e2e_launch ${KT_E2E_DIR}/launch.c)
target_compile_definitions(e2e_launch PRIVATE _GNU_SOURCE)
ktrace_e2e_test(hostenv PROGRAMS e2e_hostenv e2e_hostenv_mlock e2e_hostenv_static e2e_launch
  e2e_plugin
  LABELS faults threads)
add_dependencies(test_e2e_hostenv e2e_budget_lib)
target_compile_definitions(test_e2e_hostenv PRIVATE
  KT_PLUGIN_PATH="$<TARGET_FILE:e2e_plugin>" KT_OTHER_LIB_PATH="$<TARGET_FILE:e2e_budget_lib>")

# The lean mode (docs/lean.md, lib/lean.c): programs compiled with the lean
# flags, as a PIE, as a non-PIE, statically linked (the patching test
# reaches the library's hidden test switch), a dlopen'ed lean plugin and a
# C++ program that throws.  x86-64 with GCC only (KTRACE_LEAN_CFLAGS is
# empty elsewhere); the test itself always runs and skips there.
if(KTRACE_LEAN_CFLAGS)
  string(REPLACE " " ";" KT_LEAN_OPTS "${KTRACE_LEAN_CFLAGS}")
  ktrace_test_program(e2e_lean SOURCES ${KT_E2E_DIR}/lean_prog.c PLAIN
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -fPIE ${KT_LEAN_OPTS})
  set_target_properties(e2e_lean PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_options(e2e_lean PRIVATE -pie)
  ktrace_test_program(e2e_lean_nopie SOURCES ${KT_E2E_DIR}/lean_prog.c PLAIN
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -fno-pie ${KT_LEAN_OPTS})
  target_link_options(e2e_lean_nopie PRIVATE -no-pie)
  # the same bound at load (-z now): main calls __fentry__ through a PLT
  # entry whose slot is filled before ktrace starts (PRECOPY in lean.c)
  ktrace_test_program(e2e_lean_nopie_now SOURCES ${KT_E2E_DIR}/lean_prog.c PLAIN
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -fno-pie ${KT_LEAN_OPTS})
  target_link_options(e2e_lean_nopie_now PRIVATE -no-pie -Wl,-z,now)
  ktrace_test_program(e2e_lean_static SOURCES ${KT_E2E_DIR}/lean_prog.c PLAIN STATIC
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -DLEAN_STATIC ${KT_LEAN_OPTS})
  # the same with 2 MiB more code: what a batch makes writable (spread)
  ktrace_test_program(e2e_lean_big SOURCES ${KT_E2E_DIR}/lean_prog.c PLAIN STATIC
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -DLEAN_STATIC -DLEAN_PAD ${KT_LEAN_OPTS})
  add_library(e2e_lean_plugin SHARED ${KT_E2E_DIR}/lean_plugin.c)
  target_compile_options(e2e_lean_plugin PRIVATE -O2 ${KT_LEAN_OPTS})
  foreach(rl a b)   # one source, two libraries (reload)
    add_library(e2e_lean_reload_${rl} SHARED ${KT_E2E_DIR}/lean_reload.c)
    target_compile_options(e2e_lean_reload_${rl} PRIVATE -O2 ${KT_LEAN_OPTS})
    target_compile_definitions(e2e_lean_reload_${rl} PRIVATE RL=${rl})
  endforeach()
  # with an RWX data segment (a section flagged "awx")
  ktrace_test_program(e2e_lean_rwx SOURCES ${KT_E2E_DIR}/lean_prog.c PLAIN
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -fPIE -DLEAN_RWX ${KT_LEAN_OPTS})
  set_target_properties(e2e_lean_rwx PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_options(e2e_lean_rwx PRIVATE -pie LINKER:--no-warn-rwx-segments)
  # the same program in the default mode (-finstrument-functions)
  ktrace_test_program(e2e_lean_fi SOURCES ${KT_E2E_DIR}/lean_prog.c
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2)
  # compiled and linked with the lean flags in one step: -p at the link
  # adds gprof's gcrt1.o, whose timer and gmon.out lib/gprof.c keeps off;
  # and with -fomit-frame-pointer, which -pg would refuse
  ktrace_test_program(e2e_lean_pglink SOURCES ${KT_E2E_DIR}/lean_prog.c PLAIN
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -fPIE -fomit-frame-pointer ${KT_LEAN_OPTS})
  set_target_properties(e2e_lean_pglink PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_options(e2e_lean_pglink PRIVATE -pie ${KT_LEAN_OPTS})
  # compiled in both modes at once (-finstrument-functions and the lean
  # flags): each call recorded once, by the lean hooks
  ktrace_test_program(e2e_lean_both SOURCES ${KT_E2E_DIR}/lean_prog.c
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -fPIE ${KT_LEAN_OPTS})
  set_target_properties(e2e_lean_both PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_options(e2e_lean_both PRIVATE -pie)
  # the two modes in one program: lean_prog.c in the lean mode, one file
  # in the default mode
  add_library(e2e_lean_mixed_fi OBJECT ${KT_E2E_DIR}/lean_mixed_fi.c)
  target_compile_options(e2e_lean_mixed_fi PRIVATE -O2 -fPIE -finstrument-functions)
  ktrace_test_program(e2e_lean_mixed SOURCES ${KT_E2E_DIR}/lean_prog.c
    $<TARGET_OBJECTS:e2e_lean_mixed_fi> PLAIN
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -fPIE ${KT_LEAN_OPTS})
  set_target_properties(e2e_lean_mixed PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_options(e2e_lean_mixed PRIVATE -pie)
  # a gprof build (-pg, mcount calls) in the default mode: gprof's profile
  # still written with ktrace linked in
  ktrace_test_program(e2e_gprof SOURCES ${KT_E2E_DIR}/lean_prog.c
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -pg)
  target_link_options(e2e_gprof PRIVATE -pg)
  # the lifecycle program in the lean mode (test_e2e_lifecycle's *_lean:
  # fork while the writer patches, exec, traced signal handlers)
  ktrace_test_program(e2e_life_lean SOURCES ${KT_E2E_DIR}/lifecycle_prog.c
    ${KT_E2E_DIR}/slow_phdr.c PLAIN
    LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -fPIE -Wno-prio-ctor-dtor ${KT_LEAN_OPTS})
  set_target_properties(e2e_life_lean PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_options(e2e_life_lean PRIVATE -pie)
  add_dependencies(test_e2e_lifecycle e2e_life_lean)
  target_compile_definitions(test_e2e_lifecycle PRIVATE KT_LIFE_LEAN=1)
  set(KT_LEAN_PROGS e2e_lean e2e_lean_nopie e2e_lean_static e2e_lean_big e2e_lean_plugin
      e2e_lean_reload_a e2e_lean_reload_b e2e_lean_fi e2e_lean_nopie_now e2e_lean_rwx
      e2e_lean_pglink e2e_gprof e2e_lean_both e2e_lean_mixed e2e_launch)
  # lld lays the code segment out at an address that is not a page's
  # start: the lean mode must put it back to read+exec all the same
  include(CheckCSourceCompiles)
  set(CMAKE_REQUIRED_LINK_OPTIONS -fuse-ld=lld)
  check_c_source_compiles("int main(void) { return 0; }" KT_HAVE_LLD)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(KT_HAVE_LLD)
    ktrace_test_program(e2e_lean_lld SOURCES ${KT_E2E_DIR}/lean_prog.c PLAIN
      LINK ${CMAKE_DL_LIBS} OPTIONS -O2 -fPIE ${KT_LEAN_OPTS})
    set_target_properties(e2e_lean_lld PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_link_options(e2e_lean_lld PRIVATE -pie -fuse-ld=lld)
    list(APPEND KT_LEAN_PROGS e2e_lean_lld)
  endif()
  if(TARGET ktrace-example-shapes)   # a C++ compiler was found
    enable_language(CXX)
    ktrace_test_program(e2e_lean_cxx SOURCES ${KT_E2E_DIR}/lean_cxx.cc PLAIN
      OPTIONS -O2 ${KT_LEAN_OPTS})
    list(APPEND KT_LEAN_PROGS e2e_lean_cxx)
  endif()
endif()
ktrace_e2e_test(lean PROGRAMS ${KT_LEAN_PROGS} LABELS threads)
set_tests_properties(test_e2e_lean PROPERTIES RUN_SERIAL TRUE)

# The requests suite again on request_prog built in the lean mode: a
# thread running a request records into its hold buffer, which the lean
# hooks' assembly leaves to the C paths (lib/record.c).  -O1 as the
# default-mode build (no sibling calls to change the nesting).
if(KTRACE_LEAN_CFLAGS)
  ktrace_test_program(e2e_request_lean SOURCES ${KT_E2E_DIR}/request_prog.c PLAIN
    OPTIONS -fPIE ${KT_LEAN_OPTS})
  set_target_properties(e2e_request_lean PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_options(e2e_request_lean PRIVATE -pie)
  add_cmocka_test(test_e2e_requests_lean
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_e2e_requests.c
    LINK ktest_dec
    LABELS e2e threads)
  target_compile_definitions(test_e2e_requests_lean PRIVATE KT_REQUESTS_LEAN)
  add_dependencies(test_e2e_requests_lean e2e_request_lean ktrace-decode)
endif()

# The writer thread never mallocs (lib/snapfile.c): three suites run with
# tests/e2e/nomalloc.c preloaded, which ends a traced program with status 97
# if its writer calls malloc.  Their writers patch in big batches (lean's
# reload: 600 functions), write snapshots and explain triggers, fork and
# exec.  Not under a sanitizer (its runtime must be the first library and
# owns malloc) nor an emulator (qemu-user would preload a target library
# into itself): there the suites run without it.  (They used to run twice
# in the plain build, with and without the preload: 38 s of the step, the
# lean one alone; the preload changes nothing else a test sees.)
add_library(e2e_nomalloc SHARED ${KT_E2E_DIR}/nomalloc.c)
target_link_libraries(e2e_nomalloc PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
if(NOT KTRACE_ASAN AND NOT KTRACE_TSAN AND
   NOT (CMAKE_CROSSCOMPILING AND CMAKE_CROSSCOMPILING_EMULATOR))
  foreach(t lean lifecycle trigger_run)
    if(TEST test_e2e_${t})
      set_property(TEST test_e2e_${t} APPEND PROPERTY ENVIRONMENT
        "LD_PRELOAD=$<TARGET_FILE:e2e_nomalloc>")
      set_property(TEST test_e2e_${t} APPEND PROPERTY LABELS nomalloc)
      add_dependencies(test_e2e_${t} e2e_nomalloc)
    endif()
  endforeach()
endif()
