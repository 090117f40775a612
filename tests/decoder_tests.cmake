# Decoder tests: cmocka unit tests per stage, a golden fixture, the fuzz
# corpus replay, and (with -DKTRACE_BUILD_FUZZ=ON and clang) the libFuzzer
# target ktrace-fuzz-read.
set(KTRACE_DEC_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})

# Synthetic snapshot builder, reusable by any test (tests/snapbuild.h).
add_library(ktrace_snapbuild STATIC ${KTRACE_DEC_TESTS_DIR}/snapbuild.c)
target_include_directories(ktrace_snapbuild PUBLIC ${KTRACE_DEC_TESTS_DIR}
  ${PROJECT_SOURCE_DIR}/include)
target_compile_options(ktrace_snapbuild PRIVATE ${KTRACE_WARNINGS})
target_link_libraries(ktrace_snapbuild PUBLIC ktrace_decoder)

# snapgen golden|big|corpus: writes synthetic files (fixtures, seeds, bench).
add_executable(ktrace-snapgen ${KTRACE_DEC_TESTS_DIR}/snapgen.c)
target_link_libraries(ktrace-snapgen PRIVATE ktrace_snapbuild)

foreach(t read timeline symbols outputs golden html perfetto sched stream range merge exclude requests)
  add_cmocka_test(test_decoder_${t}
    SOURCES ${KTRACE_DEC_TESTS_DIR}/test_decoder_${t}.c
    LINK ktrace_snapbuild ktrace_decoder
    LABELS decoder)
endforeach()
# The symbols test looks up its own static functions: keep them in .symtab;
# two more files hold a static function each of the same name.
target_sources(test_decoder_symbols PRIVATE ${KTRACE_DEC_TESTS_DIR}/symbols_twin_a.c
  ${KTRACE_DEC_TESTS_DIR}/symbols_twin_b.c)
target_compile_options(test_decoder_symbols PRIVATE -O0 -fno-inline)
target_compile_options(test_decoder_exclude PRIVATE -O0 -fno-inline)

# Every fuzz corpus and regression input, through the fuzz entry point.
add_executable(ktrace-fuzz-regress ${KTRACE_DEC_TESTS_DIR}/fuzz/fuzz_read.c
  ${KTRACE_DEC_TESTS_DIR}/fuzz/regress_main.c)
target_link_libraries(ktrace-fuzz-regress PRIVATE ktrace_snapbuild ktrace_decoder)
add_test(NAME decoder_fuzz_regressions COMMAND ktrace-fuzz-regress
  ${KTRACE_DEC_TESTS_DIR}/fuzz/corpus ${KTRACE_DEC_TESTS_DIR}/fuzz/regressions)
set_tests_properties(decoder_fuzz_regressions PROPERTIES LABELS decoder TIMEOUT 600)

add_executable(ktrace-fuzz-elf-regress ${KTRACE_DEC_TESTS_DIR}/fuzz/fuzz_elf.c
  ${KTRACE_DEC_TESTS_DIR}/fuzz/regress_main.c)
target_link_libraries(ktrace-fuzz-elf-regress PRIVATE ktrace_snapbuild ktrace_decoder)
add_test(NAME decoder_fuzz_elf_regressions COMMAND ktrace-fuzz-elf-regress
  ${KTRACE_DEC_TESTS_DIR}/fuzz/corpus-elf ${KTRACE_DEC_TESTS_DIR}/fuzz/regressions-elf)
set_tests_properties(decoder_fuzz_elf_regressions PROPERTIES LABELS decoder TIMEOUT 600)

if(KTRACE_BUILD_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "KTRACE_BUILD_FUZZ needs clang: configure with CC=clang")
  endif()
  # The decoder again, instrumented for coverage, under ASan + UBSan.
  file(GLOB KTRACE_DEC_FUZZ_SOURCES ${PROJECT_SOURCE_DIR}/decoder/*.c)
  list(FILTER KTRACE_DEC_FUZZ_SOURCES EXCLUDE REGEX "/main\\.c$")
  add_executable(ktrace-fuzz-read ${KTRACE_DEC_TESTS_DIR}/fuzz/fuzz_read.c
    ${KTRACE_DEC_FUZZ_SOURCES}
    $<TARGET_OBJECTS:ktrace_html_template>)
  target_include_directories(ktrace-fuzz-read PRIVATE ${PROJECT_SOURCE_DIR}/decoder
    ${PROJECT_SOURCE_DIR}/include)
  target_compile_definitions(ktrace-fuzz-read PRIVATE _GNU_SOURCE)
  target_compile_options(ktrace-fuzz-read PRIVATE -g -O1 -fno-omit-frame-pointer
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
  target_link_options(ktrace-fuzz-read PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(ktrace-fuzz-read PRIVATE m)

  # The ELF symbol reader alone (seeds: tests/fuzz/corpus-elf).
  add_executable(ktrace-fuzz-elf ${KTRACE_DEC_TESTS_DIR}/fuzz/fuzz_elf.c
    ${KTRACE_DEC_FUZZ_SOURCES}
    $<TARGET_OBJECTS:ktrace_html_template>)
  target_include_directories(ktrace-fuzz-elf PRIVATE ${PROJECT_SOURCE_DIR}/decoder
    ${PROJECT_SOURCE_DIR}/include)
  target_compile_definitions(ktrace-fuzz-elf PRIVATE _GNU_SOURCE)
  target_compile_options(ktrace-fuzz-elf PRIVATE -g -O1 -fno-omit-frame-pointer
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
  target_link_options(ktrace-fuzz-elf PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(ktrace-fuzz-elf PRIVATE m)
endif()

# The decoder against its environment (issue 11): special files named by a
# snapshot, files truncated while read, out of memory (runs ktrace-decode
# under RLIMIT_AS), deep recursion, longjmp.
add_cmocka_test(test_decoder_harden
  SOURCES ${KTRACE_DEC_TESTS_DIR}/test_decoder_harden.c
  LINK ktrace_snapbuild ktrace_decoder
  LABELS decoder)
add_dependencies(test_decoder_harden ktrace-decode)
add_dependencies(test_decoder_stream ktrace-decode)

# The HTML timeline in headless Chromium on a synthetic snapshot (issue 18):
# pixel probes, off-CPU, search against stats, requests against explain
# (tests/html/viewercheck.py; skipped when chromium cannot be installed).
add_test(NAME test_html_viewer COMMAND ${KTRACE_DEC_TESTS_DIR}/html/viewercheck.sh
  $<TARGET_FILE:ktrace-decode> $<TARGET_FILE:ktrace-snapgen>
  ${CMAKE_CURRENT_BINARY_DIR}/html-viewer ${CMAKE_CURRENT_BINARY_DIR}/html-shots)
set_tests_properties(test_html_viewer PROPERTIES LABELS "decoder;html" SKIP_RETURN_CODE 77
  TIMEOUT 300)

# The golden corpus (tests/golden/): every format of a few real and
# synthetic snapshots (alone, merged, cut by ranges) byte for byte against
# the recorded outputs; -DMODE=update records new ones (golden.cmake says how).
add_test(NAME test_decoder_corpus COMMAND ${CMAKE_COMMAND}
  -DDECODE=$<TARGET_FILE:ktrace-decode> -DSRC=${KTRACE_DEC_TESTS_DIR}/golden
  -DOUT=${CMAKE_CURRENT_BINARY_DIR}/golden-corpus -P ${KTRACE_DEC_TESTS_DIR}/golden/golden.cmake)
set_tests_properties(test_decoder_corpus PROPERTIES LABELS decoder TIMEOUT 300)

# The decoder's files include and call each other without circles, no
# output format's file includes or calls another's or reaches the reader's
# or builder's headers (the sources; nm on the library for the calls).
add_test(NAME test_decoder_layers COMMAND python3 ${KTRACE_DEC_TESTS_DIR}/decoder_layers.py
  ${PROJECT_SOURCE_DIR}/decoder $<TARGET_FILE:ktrace_decoder>)
set_tests_properties(test_decoder_layers PROPERTIES LABELS decoder SKIP_RETURN_CODE 77)
