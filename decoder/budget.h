/*
 * budget.h - budget.c: the window budget's muted functions and the note the
 * sinks print about them.  A helper of the sinks.
 */
#ifndef KD_BUDGET_H
#define KD_BUDGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"

/* The window budget (budget.c, a helper of the sinks): the summary's
 * lines, the note the sinks print ("self time includes muted calls: ..."),
 * whether a function is muted (index in snap.muted, or -1). */
void kd_budget_lines(FILE *f, const struct kd_dec *d);
void kd_budget_note(FILE *f, const struct kd_dec *d, const char *prefix);
/* The same condensed: the first max functions, then "and N more". */
void kd_budget_note_short(FILE *f, const struct kd_dec *d, const char *prefix, uint32_t max);
const char *kd_budget_muted_list(const struct kd_dec *d, char *buf, size_t len);
/* Name of snap.muted[i] (its function's, else its address in buf). */
const char *kd_budget_muted_name(const struct kd_dec *d, uint32_t i, char *buf, size_t len);
int kd_budget_muted(const struct kd_dec *d, uint32_t func);

#endif /* KD_BUDGET_H */
