/*
 * out-folded.h - --format folded (out-folded.c).
 */
#ifndef KD_OUT_FOLDED_H
#define KD_OUT_FOLDED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"
#include "sink.h"

/* Folded stacks: frames deeper than this are cut, "[up_to_N_frames_cut]". */
#define KD_FOLD_DEPTH 512u
/* Folded stacks from the event stream (out-folded.c): memory per distinct
 * stack, not per call; walks d (through its range, kd_range_walk_cut).  0, or
 * -1 (out of memory building the timeline). */
int kd_out_folded_stream(FILE *f, struct kd_dec *d, const struct kd_out_opts *o);

#endif /* KD_OUT_FOLDED_H */
