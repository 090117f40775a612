/*
 * decoder.h - the stages of ktrace-decode, shared by the program, the unit
 * tests, the fuzz target and other engineers' end-to-end tests.
 *
 * Stages (each takes in-memory input and can be tested alone):
 *
 *   1. read.c      kd_snap_read(): bytes -> struct kd_snap.  The only
 *                  parser of the file: validates every length, offset and
 *                  CRC; damaged blocks are dropped and reported.
 *   1. read.c      also the file I/O (kd_snap_read_fd's windows, kd_read_whole_fd
 *                  for pipes, kd_read_pread).
 *   2. iter.c      kd_iter_order(): groups blocks per core, oldest first.
 *                  struct kd_core_iter: one core's records -> events with
 *                  absolute ticks and thread slots (inner loop in iter.h).
 *   3. build.c     kd_build_prepare(): cuts the cores' streams into pieces of
 *                  one thread segment (window, core runs, threads);
 *                  kd_build_walk(): walks each thread's pieces in order,
 *                  rebuilds its call stack across cores and emits the event
 *                  stream (stream.h) to a sink; requests, marks.
 *                  collect.c: the collector sink -> d->calls.
 *   4. time.c      the one clock conversion (ticks -> ns, wall clock via
 *                  ANCHORS), used by every format.
 *   5. symbols.c   function addresses -> names (ELF .symtab/.dynsym).
 *   6. out-*.c     sinks, one file per format: summary, text, stats,
 *                  chrome, explain, folded ... (main.c's table says which
 *                  consume the stream and which need the collector's
 *                  arrays); a sink calls no other sink.
 *   range.c        the time range: one filter on the stream, in front of
 *                  every walk (kd_range_walk_cut); merge.c: overlapping
 *                  snapshots of one process cut once.
 *   dec.c          the decoder's lifecycle, composing the stages:
 *                  kd_dec_open_*, kd_dec_collect, kd_dec_free.
 *   names.c time.c budget.c calltree.c requests.c: helpers the sinks
 *                  share (names, the clock, the muted functions, call
 *                  trees, request histograms).
 *   util.c         x-alloc, the growable array, hash map, string pool,
 *                  warnings, errors, CRC-32C (util.h).
 * No file calls another in a circle (test_decoder_layers).
 *
 * Each stage has its own header (snap.h, read.h, iter.h, result.h,
 * build.h, collect.h, dec.h, kd_time.h, symbols.h, names.h, kd_sched.h,
 * range.h, merge.h, calltree.h, budget.h, requests.h, stream.h, sink.h,
 * util.h) and each format its own (out-*.h); the decoder's files include
 * the ones they use.  This header includes them all, for the program's
 * users outside decoder/: the unit tests, the fuzz targets, the benches.
 *
 * symbols.c and build.c never call each other: the build names functions
 * by index, symbols.c fills their names afterwards.
 *
 * The one-call entry points for programs and tests are kd_dec_open_file()
 * and kd_dec_open_buffer(), which run stages 1-5 (3 with the collector).
 *
 * Errors: functions return 0 or a negative KD_E* code and fill a
 * struct kd_dec_error that names the file offset and what is wrong.
 * Problems that do not stop decoding (a damaged block, a damaged optional
 * section) are collected as warnings in struct kd_snap.warn.
 */
#ifndef KD_DECODER_H
#define KD_DECODER_H

#include "snap.h"
#include "read.h"
#include "iter.h"
#include "result.h"
#include "stream.h"
#include "build.h"
#include "collect.h"
#include "filter.h"
#include "dec.h"
#include "kd_time.h"
#include "symbols.h"
#include "names.h"
#include "kd_sched.h"
#include "range.h"
#include "merge.h"
#include "calltree.h"
#include "budget.h"
#include "requests.h"
#include "sink.h"
#include "util.h"
#include "out-chrome.h"
#include "out-exclude.h"
#include "out-explain.h"
#include "out-folded.h"
#include "out-html.h"
#include "out-perfetto.h"
#include "out-stats.h"
#include "out-summary.h"
#include "out-text.h"

#endif /* KD_DECODER_H */
