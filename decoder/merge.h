/*
 * merge.h - merge.c: several files on one timeline; snapshots of one process
 * cut once so that each call appears once.
 */
#ifndef KD_MERGE_H
#define KD_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

/* Same host, pid, start_tsc and tsc_shift: snapshots of one process. */
int kd_merge_same_process(const struct kd_dec *a, const struct kd_dec *b);
/* Group the files by process and cut overlapping snapshots of one process so
 * that each call appears once (see merge.c). */
void kd_merge_files(struct kd_dec *const *decs, uint32_t n);
/* ns since the epoch: the earliest window start of the files. */
int64_t kd_merge_origin(struct kd_dec *const *decs, uint32_t n);

#endif /* KD_MERGE_H */
