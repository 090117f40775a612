# golden.cmake - every output format of ktrace-decode on a corpus of
# snapshots, byte for byte against the outputs recorded in expected.tar.gz.
#
#   cmake -DDECODE=ktrace-decode -DSRC=tests/golden -DOUT=DIR [-DMODE=update] -P golden.cmake
#
# The corpus (this directory): golden-v1.ktrace (synthetic, tests/snapbuild.c:
# 3 threads, cpu 1's ring wrapped, a format-1 trigger), viewer.ktrace
# (synthetic: requests, context switches), range-trigger.ktrace and
# range-final.ktrace (two snapshots of one run of tests/e2e/range_prog.c,
# a real traced program: the trigger's and the final one, which overlap).
# Cases: each file alone, the two real ones merged, time ranges (one that
# clips the trigger request, one that leaves it out, --around-trigger,
# --min-dur, a range over the merge).  Each case runs in every format;
# stdout and stderr are compared (stderr with -q: one line per file).
# ELF files are never read (--sysroot names a directory that does not
# exist), so the outputs do not depend on where the test programs were
# built.  html: only the data (the <script class="ktrace-data"> pieces),
# not the page template, which changes on its own.
#
# MODE=update records the current decoder's outputs as the expected ones
# (then look at `git diff --stat` and say why they changed in the commit).
# On a mismatch the test fails naming the outputs; OUT/actual and
# OUT/expected hold both sides for diff -r.
cmake_minimum_required(VERSION 3.16)

set(FORMATS summary text stats explain folded exclude chrome perfetto html)
# name|arguments, space-separated (files relative to SRC)
set(CASES
  "golden-v1|golden-v1.ktrace"
  "viewer|viewer.ktrace"
  "trigger|range-trigger.ktrace"
  "final|range-final.ktrace"
  "merge|range-trigger.ktrace range-final.ktrace"
  "range|--from 21:06:37.99 --to 21:06:38.03 range-final.ktrace"
  "range-clips-trigger|--from 21:06:38.040 --to 21:06:38.050 range-trigger.ktrace"
  "range-without-trigger|--to 21:06:38.014 range-trigger.ktrace"
  "around-trigger|--around-trigger 3ms range-trigger.ktrace"
  "min-dur|--min-dur 30us range-final.ktrace"
  "merge-range|--from 21:06:38.0 --to 21:06:38.1 range-trigger.ktrace range-final.ktrace"
  "golden-v1-range|--from +2us --to +9us golden-v1.ktrace"
)

if(NOT DECODE OR NOT SRC OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DDECODE=... -DSRC=... -DOUT=... [-DMODE=update] -P golden.cmake")
endif()
file(REMOVE_RECURSE ${OUT}/actual ${OUT}/expected)
file(MAKE_DIRECTORY ${OUT}/actual ${OUT}/expected)

# The html page's data pieces only.
function(html_data path)
  file(READ ${path} page)
  set(data "")
  set(tag "<script type=\"application/json\" class=\"ktrace-data\">")
  while(TRUE)
    string(FIND "${page}" "${tag}" at)
    if(at EQUAL -1)
      break()
    endif()
    string(LENGTH "${tag}" tl)
    math(EXPR at "${at} + ${tl}")
    string(SUBSTRING "${page}" ${at} -1 page)
    string(FIND "${page}" "</script>" end)
    string(SUBSTRING "${page}" 0 ${end} piece)
    string(APPEND data "${piece}\n")
    string(SUBSTRING "${page}" ${end} -1 page)
  endwhile()
  file(WRITE ${path} "${data}")
endfunction()

set(names "")
foreach(c ${CASES})
  string(FIND "${c}" "|" bar)
  string(SUBSTRING "${c}" 0 ${bar} name)
  math(EXPR bar "${bar} + 1")
  string(SUBSTRING "${c}" ${bar} -1 args)
  separate_arguments(args UNIX_COMMAND "${args}")
  foreach(fmt ${FORMATS})
    set(base ${name}.${fmt})
    execute_process(
      COMMAND ${DECODE} -q --sysroot /nonexistent-ktrace-golden --format ${fmt} ${args}
      WORKING_DIRECTORY ${SRC}
      OUTPUT_FILE ${OUT}/actual/${base}.out
      ERROR_FILE ${OUT}/actual/${base}.err
      RESULT_VARIABLE rc)
    file(APPEND ${OUT}/actual/${base}.err "exit ${rc}\n")
    if(fmt STREQUAL "html")
      html_data(${OUT}/actual/${base}.out)
    endif()
    list(APPEND names ${base}.out ${base}.err)
  endforeach()
endforeach()

if(MODE STREQUAL "update")
  execute_process(COMMAND ${CMAKE_COMMAND} -E tar cfz ${SRC}/expected.tar.gz
                  --mtime=2000-01-01 --format=gnutar ${names}
                  WORKING_DIRECTORY ${OUT}/actual RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "could not write ${SRC}/expected.tar.gz")
  endif()
  list(LENGTH names n)
  message(STATUS "recorded ${n} outputs in ${SRC}/expected.tar.gz")
  return()
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -E tar xfz ${SRC}/expected.tar.gz
                WORKING_DIRECTORY ${OUT}/expected RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "could not read ${SRC}/expected.tar.gz")
endif()
set(bad "")
foreach(f ${names})
  if(NOT EXISTS ${OUT}/expected/${f})
    list(APPEND bad "${f} (not recorded)")
    continue()
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT}/actual/${f} ${OUT}/expected/${f}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    list(APPEND bad ${f})
  endif()
endforeach()
list(LENGTH names n)
if(bad)
  list(LENGTH bad nb)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "${nb} of ${n} outputs differ from the recorded ones:\n  ${bad}\n"
          "compare: diff -r ${OUT}/expected ${OUT}/actual\n"
          "a deliberate change: record it with -DMODE=update (tests/golden/golden.cmake) "
          "and say why in the commit")
endif()
message(STATUS "${n} outputs identical to the recorded ones")
