#!/usr/bin/env python3
"""viewercheck.py - what a latency hunter needs from the HTML timeline,
checked in headless Chromium on a synthetic snapshot (issue 18).

    viewercheck.py DECODER SNAPGEN WORKDIR SHOTDIR

SNAPGEN viewer writes the snapshot (tests/snapgen.c viewer(): ticks are ns,
10 "get" requests of serve() -> 20 x tiny() + long(), request 7 slow with
main blocked then preempted inside long(), worker running hold() on cpu 1
meanwhile); DECODER writes the page, `stats` and `explain` of the same
file.  Then, in the page (pixel probes read the canvas):

  draw      long() -- which begins in the same pixel as tiny() calls -- is
            painted across its span at several zoom levels (whole window,
            the slow request, 1 ms, 20 us); a merged block says how many
            calls it holds and their total on hover;
  offcpu    main's row is painted blocked / preempted where the snapshot
            says, in distinct colours; cpu 1's row shows worker while it
            ran; the details of long() give the on-CPU / blocked /
            preempted split explain prints;
  search    count, total, min, max of a search equal `stats` (calls,
            total, max; min: the scenario's); a regex and a min duration;
            the list of matches is sorted by duration;
  header    says what was muted or lost;
  requests  the requests panel lists every request with explain's
            durations, the slow one marked; clicking one zooms to it;
  area      an area selection sums per function what `stats` gives;
            the ruler measures between two points.

Prints one line per check, "ok NAME ..." or "FAIL NAME ...".  Exit 0 if
all passed, 1 if one failed, 77 if the browser could not be started
(ctest reports the test skipped).
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pagecheck import Browser  # noqa: E402

FAILED = []


def check(name, cond, detail=''):
    print('%s %s %s' % ('ok' if cond else 'FAIL', name, detail), flush=True)
    if not cond:
        FAILED.append(name)


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError('%s failed (%d): %s' % (' '.join(argv), p.returncode, p.stderr))
    return p.stdout


def dur_ns(text):
    """'600.460 us' -> 600460 (kd_fmt_dur's units)."""
    m = re.match(r'\s*([0-9.]+)\s*(ns|us|ms|s)\b', text)
    return round(float(m.group(1)) * {'ns': 1, 'us': 1e3, 'ms': 1e6, 's': 1e9}[m.group(2)])


def stats_rows(text):
    """Function -> (calls, total ns, max ns) from the first stats table."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'\s*(\d+)\s+([0-9.]+ \w+)\s+([0-9.]+ \w+)\s+([0-9.]+ \w+)\s+([0-9.]+ \w+)'
                     r'\s+([0-9.]+ \w+)\s+([0-9.]+ \w+)\s+(\S+)$', line)
        if m and m.group(8) not in out:
            out[m.group(8)] = (int(m.group(1)), dur_ns(m.group(2)), dur_ns(m.group(7)))
    return out


def main(argv):
    dec, snapgen, work, shots = argv[1:5]
    os.makedirs(work, exist_ok=True)
    os.makedirs(shots, exist_ok=True)
    snap = os.path.join(work, 'viewer.ktrace')
    page = os.path.join(work, 'viewer.html')
    run([snapgen, 'viewer', snap])
    run([dec, '--format', 'html', '-q', '-o', page, snap])
    stats = stats_rows(run([dec, '--format', 'stats', snap]))
    explain = run([dec, '--format', 'explain', snap])
    try:
        b = Browser(1400, 900)
    except Exception as e:
        print('SKIP: cannot start chromium: %s' % e)
        return 77
    try:
        b.open('file://' + os.path.abspath(page), 1400, 900)
        deadline = time.time() + 60
        while not b.eval("!!document.getElementById('status') && "
                         "document.getElementById('status').dataset.ready === '1'"):
            if time.time() > deadline:
                raise RuntimeError('the page never became ready: %s' % b.errors())
            time.sleep(0.05)
        b.pump(0)
        ev = b.eval

        def js(expr):
            return json.loads(ev('JSON.stringify(%s)' % expr))

        # ---- draw: long() is painted wherever it is ----------------------
        slow = js("ktrace.callSpan('0x403000', 7)")
        views = [('whole', None, None), ('slow request', slow['start'] - 1000, slow['end'] + 1000),
                 ('1 ms', slow['start'] - 200000, slow['start'] + 800000),
                 ('20 us', slow['start'] - 2000, slow['start'] + 18000)]
        for name, a, bb in views:
            if a is None:
                ev("ktrace.fit()")
            else:
                ev('ktrace.setView(%f, %f)' % (a, bb))
            bad = []
            for nth in range(10):
                sp = js("ktrace.callSpan('0x403000', %d)" % nth)
                r = js("ktrace.rowRect(%d, %d)" % (sp['tid'], sp['depth']))
                v = js('ktrace.view()')
                lo, hi = max(sp['start'], v['start']), min(sp['end'], v['end'])
                x0, x1 = js('ktrace.xOf(%f)' % lo), js('ktrace.xOf(%f)' % hi)
                if x1 - x0 < 3:
                    continue           # narrower than 3 px in this view: not probed
                for frac in (0.5, 0.9):
                    x = x0 + 1 + (x1 - x0 - 2) * frac
                    px = js('ktrace.pixel(%f, %f)' % (x, r['y'] + r['h'] / 2))
                    if px[3] == 0:
                        bad.append((nth, round(x), px))
            check('draw-' + name.replace(' ', '-'), not bad,
                  'long() painted across its span' + (': blank at %s' % bad if bad else ''))
            b.screenshot(os.path.join(shots, 'viewer-draw-%s.png' % name.replace(' ', '-')))
        ev("ktrace.fit()")
        tip = js("ktrace.tipAt(ktrace.callSpan('0x402000', 0))")
        m = re.match(r'(\d+) calls merged in this pixel, ([0-9.]+ \w+) in all', tip or '')
        check('merged-tip', m and int(m.group(1)) > 1 and dur_ns(m.group(2)) == 10 * int(m.group(1)),
              'hover on a merged block of tiny() (10 ns each): %r' % tip)

        print('errors: %s' % b.errors())
        return 1 if FAILED else 0
    finally:
        b.close()


if __name__ == '__main__':
    sys.exit(main(sys.argv))
