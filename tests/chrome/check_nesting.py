#!/usr/bin/env python3
"""check_nesting.py TRACE.json - do the "X" events of every track (pid,
tid) of a Chrome trace nest, as speedscope and Perfetto need them to?

An event that begins inside another of its track must end inside it too.
Times are read exactly (ts/dur in us with 3 decimals -> integer ns).
Prints "events N", "tracks N", one "FAIL improper ..." line per event that
does not nest (up to 20), and exits 1 if there is any."""
import json
import sys
from collections import defaultdict


def ns(v):
    s = repr(v) if isinstance(v, float) else str(v)
    if 'e' in s or 'E' in s:
        return round(float(v) * 1000)
    whole, _, frac = s.partition('.')
    return int(whole) * 1000 + (int((frac + '000')[:3]) if frac else 0) * (-1 if s.startswith('-') else 1)


def main():
    with open(sys.argv[1]) as f:
        trace = json.load(f)
    tracks = defaultdict(list)
    n = 0
    for e in trace['traceEvents']:
        if e.get('ph') != 'X':
            continue
        b = ns(e['ts'])
        tracks[(e['pid'], e['tid'])].append((b, b + ns(e.get('dur', 0)), e.get('name'), e.get('cat')))
        n += 1
    bad = 0
    for key, evs in tracks.items():
        evs.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for b, e, name, cat in evs:
            while stack and stack[-1][1] <= b:
                stack.pop()
            if stack and e > stack[-1][1]:
                bad += 1
                if bad <= 20:
                    print('FAIL improper pid %s tid %s: %s %s [%d, %d] ends after %s %s [%d, %d]' % (
                        key[0], key[1], cat, name, b, e, stack[-1][3], stack[-1][2], stack[-1][0],
                        stack[-1][1]))
                continue
            stack.append((b, e, name, cat))
    print('events %d' % n)
    print('tracks %d' % len(tracks))
    print('improper %d' % bad)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
