# Library tests.  Included by tests/CMakeLists.txt (add_cmocka_test).
#
#   unit        white-box cmocka tests of one module each, linked to
#               ktrace_internal and not instrumented (test_lib_<module>)
#   threads     tests that run several threads (also meant for TSan)
#   e2e         traced programs + snapshot + decoder (tests/e2e_tests.cmake)
#
# Shared helpers live in tests/e2e/: ktest.c (processes, directories, an
# independent snapshot-file reader and record walker) and kunit.h.
set(KT_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})

add_library(ktest_util STATIC ${KT_TESTS_DIR}/e2e/ktest.c)
target_include_directories(ktest_util PUBLIC ${KT_TESTS_DIR}/e2e ${CMOCKA_INCLUDE_DIR}
  ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(ktest_util PRIVATE _GNU_SOURCE)
target_compile_options(ktest_util PRIVATE -Wall -Wextra -fno-instrument-functions)
# kt_skip_rm() calls cmocka's skip()
target_link_libraries(ktest_util PUBLIC ${CMOCKA_LIBRARY})

function(ktrace_unit_test module)
  cmake_parse_arguments(U "" "" "LABELS" ${ARGN})
  add_cmocka_test(test_lib_${module}
    SOURCES ${KT_TESTS_DIR}/test_lib_${module}.c
    LINK ktrace_internal ktest_util m
    LABELS unit ${U_LABELS})
endfunction()

ktrace_unit_test(ring LABELS threads)
ktrace_unit_test(funcs LABELS threads)
ktrace_unit_test(clock)
ktrace_unit_test(config)
ktrace_unit_test(trigger)
ktrace_unit_test(rseq LABELS threads)
ktrace_unit_test(wake LABELS threads)
ktrace_unit_test(sort)

# The same executables in the other modes of the library.
add_test(NAME test_lib_ring_locked COMMAND test_lib_ring)
set_tests_properties(test_lib_ring_locked PROPERTIES TIMEOUT 300 LABELS "unit;threads"
  ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout;KTRACE_RSEQ=0")
# glibc's own rseq registration off (as on glibc < 2.35): the library
# registers its own per thread.
foreach(t test_lib_ring test_lib_rseq)
  add_test(NAME ${t}_glibc_rseq0 COMMAND ${t})
  set_tests_properties(${t}_glibc_rseq0 PROPERTIES TIMEOUT 300 LABELS "unit;threads"
    ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout;GLIBC_TUNABLES=glibc.pthread.rseq=0")
endforeach()
add_test(NAME test_lib_clock_monotonic COMMAND test_lib_clock)
set_tests_properties(test_lib_clock_monotonic PROPERTIES TIMEOUT 300 LABELS unit
  ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout;KTRACE_CLOCK=monotonic")


# A traced program links with exactly what the documentation says
# (-lktrace -lpthread), against the shared and the static library (plus the
# sanitizer flags of a sanitizer build, which the library's objects need).
set(KT_LINK_PLAIN_FLAGS "")
if(KTRACE_ASAN)
  set(KT_LINK_PLAIN_FLAGS "-fsanitize=address,undefined")
elseif(KTRACE_TSAN)
  set(KT_LINK_PLAIN_FLAGS "-fsanitize=thread")
endif()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/link_plain.c
  "#include <ktrace.h>\nint main(void) { ktrace_mark(\"x\", 1); return ktrace_enabled() ? 0 : 1; }\n")
add_test(NAME test_lib_link_plain
  COMMAND sh -c "${CMAKE_C_COMPILER} ${KT_LINK_PLAIN_FLAGS} -finstrument-functions \
    -I${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_BINARY_DIR}/link_plain.c \
    -L$<TARGET_FILE_DIR:ktrace> -lktrace -lpthread \
    -o ${CMAKE_CURRENT_BINARY_DIR}/link_plain_shared && \
    ${CMAKE_C_COMPILER} ${KT_LINK_PLAIN_FLAGS} -finstrument-functions \
    -I${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_BINARY_DIR}/link_plain.c \
    $<TARGET_FILE:ktrace_static> -lpthread -o ${CMAKE_CURRENT_BINARY_DIR}/link_plain_static && \
    KTRACE_DIR=/nonexistent ${CMAKE_CURRENT_BINARY_DIR}/link_plain_static")
set_tests_properties(test_lib_link_plain PROPERTIES LABELS unit TIMEOUT 120)
ktrace_unit_test(filter)
ktrace_unit_test(filter_sample)

# The glibc symbol versions libktrace.so needs: nothing newer than 2.28
# (symbols glibc 2.34 moved into libc pass when libc also has their old
# version; see the script).
if(NOT CMAKE_CROSSCOMPILING)
  add_test(NAME test_lib_glibc_symbols
    COMMAND bash ${KT_TESTS_DIR}/check_glibc_symbols.sh $<TARGET_FILE:ktrace> GLIBC_2.28)
  set_tests_properties(test_lib_glibc_symbols PROPERTIES LABELS unit TIMEOUT 60)
endif()
# The lean fast paths use general registers only (record.c, lean.c).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  add_test(NAME test_lib_lean_gpr
    COMMAND bash ${KT_TESTS_DIR}/check_lean_gpr.sh $<TARGET_FILE:ktrace>)
  set_tests_properties(test_lib_lean_gpr PROPERTIES LABELS unit TIMEOUT 60)
endif()
