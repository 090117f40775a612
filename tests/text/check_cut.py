#!/usr/bin/env python3
"""check_cut.py FULL.txt CUT.txt - is CUT (ktrace-decode --format text with
--from/--to) the FULL timeline (the same file, no range) cut exactly?

Each thread's call lines in CUT, but those cut at the range's start (marked
"[entered before window]", all at the range's first tick, which is the
earliest line of CUT), must be FULL's call lines of that thread that begin
within CUT's first and last line times, in the same order, with the same
time, cpu, depth and function: equal timestamps keep the recorded order.
Every line cut at the start must be a call of FULL that began earlier and
had not ended by then.  Prints "kept N", "clipped N", one "FAIL ..." line
per difference (up to 20) and exits 1 if there is any."""
import re
import sys

LINE = re.compile(r'^(\d\d):(\d\d):(\d\d)\.(\d{9})  (\S+)\s+cpu(\d+)\s+( *)(span )?(\S+)  '
                  r'([0-9.]+) (ns|us|ms|s)\b')


def calls(path):
    out = []
    on = False
    with open(path, encoding='utf-8', errors='replace') as f:
        for raw in f:
            line = raw.rstrip('\n')
            if line.startswith('timeline (UTC'):
                on = True
                continue
            if line.startswith('cores (UTC'):
                on = False
            if not on:
                continue
            m = LINE.match(line)
            if not m or '>> request' in line or '~~ off-CPU' in line or '* mark' in line:
                continue
            h, mi, s, frac, thread, cpu, ind, span, name = m.groups()[:9]
            t = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1000000000 + int(frac)
            out.append((t, thread, cpu, len(ind) // 2, (span or '') + name,
                        '[entered before window]' in line))
    return out


def main():
    full = calls(sys.argv[1])
    cut = calls(sys.argv[2])
    bad = 0

    def fail(msg):
        nonlocal bad
        bad += 1
        if bad <= 20:
            print('FAIL ' + msg)

    if not cut:
        print('kept 0\nclipped 0\nimproper 0')
        return 0
    lo = min(c[0] for c in cut)
    hi = max(c[0] for c in cut)
    clipped = [c for c in cut if c[5]]
    for c in clipped:
        if c[0] != lo:
            fail('a call cut at the start is not at its first tick: %r' % (c,))
    threads = sorted(set(c[1] for c in full) | set(c[1] for c in cut))
    for th in threads:
        want = [c[:5] for c in full if c[1] == th and lo <= c[0] <= hi and
                not (c[5] and c[0] == lo)]
        got = [c[:5] for c in cut if c[1] == th and not c[5]]
        if want != got:
            for i, (a, b) in enumerate(zip(want, got)):
                if a != b:
                    fail('%s: line %d of the thread in the range: %r, expected %r' % (th, i, b, a))
                    break
            else:
                fail('%s: %d calls in the range, expected %d' % (th, len(got), len(want)))
        # the calls cut at the start: open at lo in FULL, same depths
        open_at = []
        for c in full:
            if c[1] != th or c[0] >= lo:
                continue
            open_at.append(c)
        got_c = [(c[3], c[4]) for c in cut if c[1] == th and c[5]]
        for d, name in got_c:
            if not any(o[3] == d and o[4] == name for o in open_at):
                fail('%s: %s at depth %d cut at the start was not open before it' % (th, name, d))
    print('kept %d' % (len(cut) - len(clipped)))
    print('clipped %d' % len(clipped))
    print('improper %d' % bad)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
