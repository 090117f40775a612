# End-to-end test of the demo (issue 3): the planted cause in
# examples/server.c is the top item of ktrace-decode's explanation.
# Included from tests/CMakeLists.txt; needs the examples
# (KTRACE_BUILD_EXAMPLES=ON, which the sanitizer configurations turn off).
if(TARGET ktrace-example-server)
  add_cmocka_test(test_e2e_demo
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_e2e_demo.c
    LABELS e2e)
  target_compile_definitions(test_e2e_demo PRIVATE
    KTRACE_EXAMPLE_SERVER_PATH="$<TARGET_FILE:ktrace-example-server>")
  add_dependencies(test_e2e_demo ktrace-example-server ktrace-decode)
  set_tests_properties(test_e2e_demo PROPERTIES TIMEOUT 120 RUN_SERIAL TRUE)
endif()

# test_e2e_cut_demo (`test_e2e_cut demo`) cuts the demo server's snapshot
# when the examples are built; the server's trigger wants a quiet machine,
# as test_e2e_demo's, so it runs alone.  test_e2e_cut itself (the range
# program, no timing) runs beside the others.
if(TARGET ktrace-example-server AND TARGET test_e2e_cut)
  target_compile_definitions(test_e2e_cut PRIVATE
    KTRACE_EXAMPLE_SERVER_PATH="$<TARGET_FILE:ktrace-example-server>")
  add_dependencies(test_e2e_cut ktrace-example-server)
  add_test(NAME test_e2e_cut_demo COMMAND test_e2e_cut demo)
  set_tests_properties(test_e2e_cut_demo PROPERTIES LABELS e2e TIMEOUT 300 RUN_SERIAL TRUE
    ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout")
endif()
