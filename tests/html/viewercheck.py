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
  header    says what was muted (the scenario's BUDGET section: one
            function, 12345 calls) and that switches were recorded;
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
    """'600.460 us' -> 600460 (kd_time_fmt_dur's units)."""
    m = re.match(r'\s*([0-9.]+)\s*(ns|us|ms|s)\b', text)
    return round(float(m.group(1)) * {'ns': 1, 'us': 1e3, 'ms': 1e6, 's': 1e9}[m.group(2)])


def fmt_dur(ns):
    """As kd_time_fmt_dur() and the page's fmtDur(): the text stats prints."""
    if ns < 1000:
        return '%d ns' % round(ns)
    if ns < 1e6:
        return '%.3f us' % (ns / 1e3)
    if ns < 1e9:
        return '%.3f ms' % (ns / 1e6)
    return '%.3f s' % (ns / 1e9)


def stats_rows(text):
    """Function -> (calls, total, max) from the first stats table, the
    durations as printed."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'\s*(\d+)\s+([0-9.]+ \w+)\s+([0-9.]+ \w+)\s+([0-9.]+ \w+)\s+([0-9.]+ \w+)'
                     r'\s+([0-9.]+ \w+)\s+([0-9.]+ \w+)\s+(\S+)$', line)
        if m and m.group(8) not in out:
            out[m.group(8)] = (int(m.group(1)), m.group(2), m.group(7))
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
        b7 = slow['start'] - 420          # request 7's begin (page ns)
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
        # ---- axis labels never overlap, down to the deepest zoom ------------
        bad = []
        for span in (1e7, 1e5, 3e3, 400, 120, 50):
            ev('ktrace.setView(%f, %f)' % (b7 - span / 3, b7 + span * 2 / 3))
            labels = js('ktrace.axisLabels()')
            for a, c in zip(labels, labels[1:]):
                if c[0] < a[1] + 4:
                    bad.append((span, a[2], c[2]))
            if len(labels) < 2:
                bad.append((span, 'only %d labels' % len(labels)))
        check('axis-labels', not bad, 'overlapping: %s' % bad[:3])
        ev("ktrace.fit()")
        tip = js("ktrace.tipAt(ktrace.callSpan('0x402000', 0))")
        m = re.match(r'(\d+) calls merged in this pixel, ([0-9.]+ \w+) in all', tip or '')
        check('merged-tip', m and int(m.group(1)) > 1 and dur_ns(m.group(2)) == 10 * int(m.group(1)),
              'hover on a merged block of tiny() (10 ns each): %r' % tip)

        # ---- off-CPU where the snapshot says -------------------------------
        ev('ktrace.setView(%f, %f)' % (b7 - 1000, b7 + 601460))
        row = js("ktrace.rowRect(100, 'thread')")

        def color_at(ns, r):
            return js('ktrace.pixel(%f, %f)' % (js('ktrace.xOf(%f)' % ns), r['y'] + r['h'] / 2))
        blocked = color_at(b7 + 200520, row)          # blocked [+520, +400520)
        preempted = color_at(b7 + 475520, row)        # preempted [+450520, +500520)
        running = color_at(b7 + 425520, row)          # on the cpu in between
        check('offcpu-blocked', blocked[3] > 0 and blocked[:3] != running[:3],
              'main blocked at +200 us: %s (running: %s)' % (blocked, running))
        check('offcpu-preempted', preempted[3] > 0 and preempted[:3] != blocked[:3] and
              preempted[:3] != running[:3], 'main preempted at +475 us: %s' % preempted)
        under = js("ktrace.rowRect(100, 1)")
        band = js('ktrace.pixel(%f, %f)' % (js('ktrace.xOf(%f)' % (b7 + 200520)), under['y'] + under['h'] - 3))
        check('offcpu-under-call', band[:3] == blocked[:3],
              'the band under long() while blocked: %s' % band)
        cpu1 = js("ktrace.rowRect(1, 'core')")
        on1, idle1 = color_at(b7 + 200000, cpu1), color_at(b7 + 500000, cpu1)
        check('core-thread', on1[3] > 0 and on1[:3] != idle1[:3],
              'cpu 1 while worker ran: %s, after: %s' % (on1, idle1))
        tip = js("ktrace.tipAt({start: %f, tid: 1, depth: 'core'})" % (b7 + 200000))
        check('core-tip', tip is not None and tip.startswith('worker (101) on cpu 1'), 'hover: %r' % tip)
        ev("ktrace.clickAt(%f, 100, 'thread')" % (b7 + 200520))
        det = js('ktrace.shown()')['details']
        check('offcpu-meanwhile', 'blocked' in det and 'worker (101)' in det and '0x404000' in det and
              '398.500 us on-CPU' in det, 'details of main blocked: %r' % det)
        b.screenshot(os.path.join(shots, 'viewer-offcpu.png'))
        m = re.search(r'the slow request: +([0-9.]+ \w+) on-CPU, ([0-9.]+ \w+) blocked, ([0-9.]+ \w+) preempted',
                      explain)
        ev("ktrace.clickRequest('7')")
        det = js('ktrace.shown()')['details']
        split = re.search(r'on-CPU\s+blocked\s+preempted.*?\n.*?([0-9.]+ \w+)\s+([0-9.]+ \w+)\s+([0-9.]+ \w+)', det, re.S)
        want = [dur_ns(m.group(i)) for i in (1, 2, 3)] if m else None
        got = [dur_ns(split.group(i)) for i in (1, 2, 3)] if split else None
        check('offcpu-split', want is not None and got == want,
              'details of request 7: %s, explain: %s' % (got, want))

        # ---- search: count, total, min, max as stats -----------------------
        for name in ('0x402000', '0x403000', '0x401000'):
            r = js("ktrace.search(%s)" % json.dumps(name))
            st = stats.get(name)
            got = (r['count'], fmt_dur(r['totalNs']), fmt_dur(r['maxNs']))
            check('search-' + name, st is not None and got == st, 'page: %s; stats: %s' % (got, st))
        r = js("ktrace.search('/^0x40[23]000$/', '', '')")
        check('search-regex', r['count'] == 210 and r['minNs'] == 10 and r['maxNs'] == 600000,
              'regex: %d calls, min %d, max %d' % (r['count'], r['minNs'], r['maxNs']))
        r = js("ktrace.search('0x403', '100us', '')")
        check('search-min-dur', r['count'] == 1 and r['totalNs'] == 600000, 'min 100us: %s' % r)
        r = js("ktrace.search('0x40', '', '')")
        durs = [x['ns'] for x in r['top']]
        check('search-list-sorted', durs == sorted(durs, reverse=True) and durs[0] == 600430 and
              'total' in r['panel'], 'the list: %s...' % durs[:4])
        check('search-fast', r['ms'] < 1000, '%.1f ms for a query (figures: bench/html.sh)' % r['ms'])
        b.screenshot(os.path.join(shots, 'viewer-search.png'))
        ev("ktrace.search('')")

        # ---- header ---------------------------------------------------------
        hdr = ev("document.getElementById('hdr').innerText")
        check('header-not-recorded', 'muted by the window budget: 1 function, 12,345 calls not recorded '
              'since (0x405000' in hdr and 'recorded, 7 switch records' in hdr, repr(hdr[-400:]))

        # ---- requests: every one, explain's durations ----------------------
        groups = js('ktrace.requests()')
        g = ([x for x in groups if x['kind'] == 'get'] or [{'kind': '', 'list': []}])[0]
        by = {x['id']: x for x in g['list']}
        m1 = re.search(r'trigger: "get" request #7 .* took ([0-9.]+ \w+)', explain)
        m2 = re.search(r'median "get" request in this window: #(\d+) .* took ([0-9.]+ \w+)', explain)
        check('requests-all', sorted((x['kind'], len(x['list'])) for x in groups) == [('get', 10), ('job', 1)],
              'groups: %s' % [(x['kind'], len(x['list'])) for x in groups])
        check('requests-explain', m1 and m2 and by.get('7', {}).get('ns') == dur_ns(m1.group(1)) and
              by.get(m2.group(1), {}).get('ns') == dur_ns(m2.group(2)),
              'page: #7 %s; explain: %s, median %s' % (by.get('7'), m1 and m1.group(1), m2 and m2.groups()))
        check('requests-slow', [x['id'] for x in g['list'] if x['slow']] == ['7'], 'slow: %s' %
              [x['id'] for x in g['list'] if x['slow']])
        ev("ktrace.fit()")
        ev("ktrace.clickRequest('3')")
        v = js('ktrace.view()')
        r3 = js("ktrace.callSpan('0x401000', 3)")
        check('requests-click', v['start'] <= r3['start'] and r3['end'] <= v['end'] and
              (v['end'] - v['start']) < 4 * (r3['end'] - r3['start']), 'view after clicking #3: %s' % v)
        # The job main began and worker ended: on main's first requests row,
        # request 7 (which it overlaps) on the second; its details say who
        # ended it.
        ev('ktrace.setView(%f, %f)' % (6.0e6, 7.7e6))
        lane0, lane1 = js("ktrace.rowRect(100, 'reqs')"), None
        lanes = js("(function(){var o=[];document.querySelectorAll('.row-label.requests').forEach("
                   "function(e){o.push(e.innerText);});return o;})()")
        job = color_at(6.5e6, lane0)
        r7 = js("(function(){var r=null;ktrace.clickRequest('7');return ktrace.shown();})()")
        ev("ktrace.clickRequest('99')")
        det = js('ktrace.shown()')['details']
        check('requests-handoff', job[3] > 0 and 'requests 2' in lanes and
              re.search(r'ended by\s.*worker \(101\) \(handed over\)', det, re.S) is not None,
              'job drawn %s; rows %s; details %r' % (job, lanes, det))
        ev("ktrace.requests()")
        b.screenshot(os.path.join(shots, 'viewer-requests.png'))

        # ---- area selection and ruler --------------------------------------
        ev("ktrace.fit()")
        st = js('ktrace.selectRange(-1e6, 2e7)')
        fs = {x['name']: (x['calls'], fmt_dur(x['totalNs'])) for x in st['funcs']}
        want = {k: v[:2] for k, v in stats.items()}
        check('range-whole', fs == want, 'range totals: %s; stats: %s' % (fs, want))
        st = js('ktrace.selectRange(%f, %f)' % (b7, b7 + 100000))
        fs = {x['name']: (x['calls'], x['totalNs'], x['selfNs']) for x in st['funcs']}
        th = {x['name']: x for x in st['threads']}
        check('range-part', fs.get('0x403000', (0, 0, 0))[1] == 100000 - 420 and
              th.get('main (100)', {}).get('blockedNs') == 100000 - 520 and
              'range-length' in ev("document.getElementById('side-body').innerHTML"),
              '[+0, +100 us] of request 7: %s %s' % (fs, th.get('main (100)')))
        st2 = js('ktrace.selectRange(%f, %f)' % (b7 + 0.37, b7 + 100000.61))   # not on whole ns
        check('range-fractional', len(st2['funcs']) == len(st['funcs']), 'a range not on whole ns')
        b.screenshot(os.path.join(shots, 'viewer-range.png'))

        print('errors: %s' % b.errors())
        return 1 if FAILED else 0
    finally:
        b.close()


if __name__ == '__main__':
    sys.exit(main(sys.argv))
