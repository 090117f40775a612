#!/usr/bin/env bash
# tests/check_lean_gpr.sh LIB - the lean mode's fast paths (lib/record.c:
# ktrace__lean_enter_fast, ktrace__lean_exit_fast; lib/lean.c:
# ktrace__lean_exit_known, which the exit fast path calls) must not touch a vector
# register: the __fentry__/__return__ trampolines save the general
# registers only around them (the vector ones only around the slow path),
# so a compiler that turned two word stores into one SSE store would
# corrupt a caller's floating-point arguments or results.  Fails, naming
# the instruction, if their disassembly uses %xmm, %ymm or %zmm.
set -euo pipefail
lib=$1
command -v objdump >/dev/null || { echo "objdump not found (binutils)"; exit 1; }
bad=0
dis=$(objdump -d --no-show-raw-insn "$lib")
for fn in ktrace__lean_enter_fast ktrace__lean_exit_fast ktrace__lean_exit_known; do
  body=$(awk -v f="<$fn>:" '$2 == f {p=1; next} p && /^$/ {exit} p' <<<"$dis")
  if [ -z "$body" ]; then
    echo "$fn: not found in $lib"
    bad=1
    continue
  fi
  if grep -E '%[xyz]mm[0-9]' <<<"$body"; then
    echo "$fn uses a vector register (above): the trampolines do not save them on its path"
    bad=1
  fi
done
[ "$bad" = 0 ] && echo "lean fast paths: general registers only"
exit "$bad"
