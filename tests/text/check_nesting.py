#!/usr/bin/env python3
"""check_nesting.py TIMELINE.txt - do the call lines of a ktrace-decode
--format text timeline nest, thread by thread?

For each thread (the "name/tid" column), in the order the lines are
printed, a call at indentation depth k must follow an open call of depth
k - 1 (its parent: printed before it, on the same thread), begin no earlier
than it and end no later (times printed in ns; a duration is exact to its
printed precision, 1 ns below 1 ms, so a child may end past its parent by at
most the two durations' rounding); lines of one thread never go back in
time.  Prints "calls N", "threads N", one "FAIL ..." line per violation (up
to 20), "improper N", and exits 1 if there is any."""
import re
import sys

LINE = re.compile(r'^(\d\d):(\d\d):(\d\d)\.(\d{9})  (\S+)\s+cpu\d+\s+( *)(span )?(\S+)  '
                  r'([0-9.]+) (ns|us|ms|s)\b')
UNIT = {'ns': 1, 'us': 1000, 'ms': 1000000, 's': 1000000000}


def main():
    bad = 0
    ncalls = 0
    stacks = {}   # thread -> [(depth, begin, end, tol, name)]
    last = {}     # thread -> last begin
    in_timeline = False
    with open(sys.argv[1], encoding='utf-8', errors='replace') as f:
        for raw in f:
            line = raw.rstrip('\n')
            if line.startswith('timeline (UTC'):
                in_timeline = True
                continue
            if line.startswith('cores (UTC') or line.startswith('==> '):
                in_timeline = line.startswith('==> ') and False
                continue
            if not in_timeline:
                continue
            m = LINE.match(line)
            if not m or '>> request' in line or '~~ off-CPU' in line or '* mark' in line:
                continue
            h, mi, s, frac, thread, ind, _, name, dur, unit = m.groups()
            depth = len(ind) // 2
            b = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1000000000 + int(frac)
            dec = len(dur.split('.')[1]) if '.' in dur else 0
            tol = UNIT[unit] // (10 ** dec) if unit != 'ns' else 1
            e = b + round(float(dur) * UNIT[unit])
            ncalls += 1
            if thread in last and b < last[thread]:
                bad += 1
                if bad <= 20:
                    print('FAIL back in time %s: %s' % (thread, line))
            last[thread] = b
            st = stacks.setdefault(thread, [])
            while st and st[-1][0] >= depth:
                st.pop()
            if depth != (st[-1][0] + 1 if st else 0):
                bad += 1
                if bad <= 20:
                    print('FAIL depth %d without a parent of depth %d on %s: %s' % (
                        depth, depth - 1, thread, line))
                st.append((depth, b, e, tol, name))
                continue
            if st:
                pd, pb, pe, ptol, pname = st[-1]
                if b < pb or e > pe + ptol + tol:
                    bad += 1
                    if bad <= 20:
                        print('FAIL %s [%d, %d] outside its parent %s [%d, %d] on %s' % (
                            name, b, e, pname, pb, pe, thread))
            st.append((depth, b, e, tol, name))
    print('calls %d' % ncalls)
    print('threads %d' % len(stacks))
    print('improper %d' % bad)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
