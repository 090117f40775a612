/*
 * out-perfetto.h - --format perfetto (out-perfetto.c).
 */
#ifndef KD_OUT_PERFETTO_H
#define KD_OUT_PERFETTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"
#include "sink.h"

/* Perfetto protobuf trace of all decoded files (NULL entries skipped), one
 * process group per process; several snapshots of one process merged
 * (out-perfetto.c).  0 or KD_ENOMEM; write errors show in ferror(f). */
int kd_out_perfetto(FILE *f, struct kd_dec *const *decs, uint32_t n,
                         const struct kd_out_opts *o);

#endif /* KD_OUT_PERFETTO_H */
