#!/usr/bin/env bash
# tests/check_glibc_symbols.sh LIB [MAX] - list the versioned glibc symbols
# LIB needs, and fail on any newer than MAX (default GLIBC_2.28) that no
# glibc up to MAX had.
#
# A symbol glibc 2.34 moved from libpthread/libdl into libc (pthread_create,
# pthread_key_create, ...) gets its new version when LIB is built against
# glibc 2.34+, the only one a link can name there; libc keeps the old
# version beside it, and a build on an older glibc names that one.  Such a
# symbol passes (marked "moved") when the libraries LIB loads also define it
# at a version <= MAX; with KTRACE_GLIBC_STRICT=1 (a build on an old glibc)
# it fails like any other.  __rseq_offset@GLIBC_2.35, say, exists only at
# 2.35: it fails in both modes.
set -euo pipefail
lib=${1:?usage: check_glibc_symbols.sh LIB [GLIBC_2.28]}
max=${2:-GLIBC_2.28}
objdump=${OBJDUMP:-objdump}
# "VERSION SYMBOL" for every glibc-versioned symbol OBJ refers to (in a
# library or program glibc's versions only appear on references: undefined
# symbols and copy relocations), or with ALL=1 that OBJ defines (glibc).
versions() {
  $objdump -T "$1" | awk '{ v = "" } NF >= 2 { v = $(NF-1); gsub(/[()]/, "", v) }
    v ~ /^GLIBC_[0-9]/ { print v, $NF }' | sort -u
}
vnum() { # GLIBC_2.3.4 -> 2003004
  awk -v v="${1#GLIBC_}" 'BEGIN { n = split(v, p, "."); printf "%d\n", p[1] * 1000000 + p[2] * 1000 + p[3] }'
}
maxn=$(vnum "$max")
# Libraries the check may find older versions in: LIB's glibc dependencies.
deps=$(ldd "$lib" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $3} /^\t\/.*ld-linux/ {print $1}') || true
defs=$(for d in $deps; do versions "$d" | sed "s|\$| $(basename "$d")|"; done)
bad=0
echo "versioned glibc symbols $(basename "$lib") needs (newest first):"
while read -r ver sym; do
  n=$(vnum "$ver")
  mark=""
  if [ "$n" -gt "$maxn" ]; then
    older=""
    if [ "${KTRACE_GLIBC_STRICT:-0}" != 1 ]; then
      older=$(awk -v s="$sym" -v m="$maxn" '$2 == s { v = $1; sub(/^GLIBC_/, "", v)
        split(v, p, "."); if (p[1] * 1000000 + p[2] * 1000 + p[3] <= m) { print $1 " in " $3; exit } }' <<<"$defs")
    fi
    if [ -n "$older" ]; then
      mark="  (moved: also $older)"
    else
      mark="  NEWER THAN $max"
      bad=1
    fi
  fi
  printf '  %-14s %s%s\n' "$ver" "$sym" "$mark"
done < <(versions "$lib" | while read -r v s; do echo "$(vnum "$v") $v $s"; done |
  sort -k1,1nr -k3 | cut -d' ' -f2-)
if [ "$bad" = 1 ]; then
  echo "$(basename "$lib") needs glibc symbols newer than $max (above): look them up at run time" >&2
  echo "or use an older interface; see docs/security-and-limits.md." >&2
  exit 1
fi
echo "ok: $(basename "$lib") loads on $max and later (as far as symbol versions go)"
