/*
 * names.h - names.c: names of functions (with labels, shortened C++ names),
 * threads, name ids and requests; the demangler.  A helper of the sinks.
 */
#ifndef KD_NAMES_H
#define KD_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

const char *kd_names_func(const struct kd_dec *d, uint32_t func);
/* The function's symbol name, without the label a repeated name gets. */
const char *kd_names_func_sym(const struct kd_dec *d, uint32_t func);
/* The timeline form of a function's name (names.c). */
const char *kd_names_func_short(const struct kd_dec *d, uint32_t func);

#define KD_SHORT_NAME_MAX 80  /* bytes a timeline name keeps whole */
int kd_names_is_mangled(const char *name);
/* Demangled copy (free() it) of an Itanium C++ name; NULL if name is not
 * one, does not demangle, or no C++ runtime (libstdc++) is installed. */
char *kd_names_demangle(const char *name);
int kd_names_demangler_missing(void);
/* name, or its short form written into buf. */
const char *kd_names_shorten(const char *name, char *buf, size_t cap);
/* Name id -> string; unknown ids get "name#N" (static buffer per call site: copy it). */
const char *kd_names_id(const struct kd_dec *d, uint32_t id, char *buf, size_t len);
/* "name/tid" label of a thread into buf. */
const char *kd_names_thread(const struct kd_dec *d, uint32_t thread,
                                     char *buf, size_t len);
/* Decoder-owned string copy (lives as long as d). */
const char *kd_names_strdup(struct kd_dec *d, const char *s);

/* "get #1234" (format 2), "get id=987654" (with the program's id), "get
 * #3.17" (format 1: thread slot . sequence) into buf. */
const char *kd_names_req(const struct kd_dec *d, const struct kd_dec_request *q, char *buf,
                         size_t len);
/* The id part alone: "#1234", "id=987654", "#3.17". */
const char *kd_names_req_id(const struct kd_dec_request *q, char *buf, size_t len);
/* "slow, sampled" for keep flags into buf ("" for none). */
const char *kd_names_req_keep(uint32_t keep, char *buf, size_t len);

#endif /* KD_NAMES_H */
