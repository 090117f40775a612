/*
 * out-exclude.h - --format exclude (out-exclude.c).
 */
#ifndef KD_OUT_EXCLUDE_H
#define KD_OUT_EXCLUDE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"

/* --format exclude (out-exclude.c): one flag line for all files (NULL
 * entries skipped), notes on stderr. */
void kd_out_exclude(FILE *f, struct kd_dec *const *decs, int n);

#endif /* KD_OUT_EXCLUDE_H */
