#!/usr/bin/env python3
"""html_open.py PAGE [RUNS] - open a ktrace HTML timeline in headless
Chromium RUNS times (default 3) and print the medians: time to open
(navigation start to the first frame drawn), of which parsing the HTML,
JSON.parse and unpacking; the CPU time all browser processes spent
meanwhile (less sensitive to other tenants than the wall time); and the time to draw one frame over the whole window, zoomed
in 100x, and while panning (20 pans of a fifth of the view); and the time
a search takes (exact name, substring, regex, min duration).  Uses the
DevTools driver of tests/html/pagecheck.py; figures, never a verdict."""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'html'))
from pagecheck import Browser  # noqa: E402


def cpu_ms(root):
    """CPU time (user + system, ms) of process root and its descendants."""
    procs = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % d) as f:
                st = f.read().rsplit(')', 1)[1].split()
            procs[int(d)] = (int(st[1]), int(st[11]) + int(st[12]))
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        total += procs.get(p, (0, 0))[1]
        todo.extend(c for c, (pp, _) in procs.items() if pp == p)
    return total * 1000.0 / os.sysconf('SC_CLK_TCK')


def once(page):
    b = Browser(1400, 900)
    try:
        b.send('Target.getTargets', session=False)
        time.sleep(0.5)
        cpu0 = cpu_ms(b.proc.pid)
        b.open('file://' + os.path.abspath(page), 1400, 900)
        deadline = time.time() + 300
        while not b.eval("!!document.getElementById('status') && "
                         "document.getElementById('status').dataset.ready === '1'"):
            if time.time() > deadline:
                raise RuntimeError('page never became ready')
            time.sleep(0.05)
        cpu = cpu_ms(b.proc.pid) - cpu0
        ph = b.eval('ktrace.phase')
        r = {'open': b.eval('ktrace.openMs'), 'unpack': b.eval('ktrace.loadMs'),
             'cpu': cpu, 'parse': ph['scriptStart'], 'json': ph['json'], 'decode': ph['unpack'],
             'calls': b.eval('ktrace.calls'), 'whole': b.eval('ktrace.frameMs(5)')}
        b.eval('ktrace.zoomAt(0.01)')
        r['zoomed'] = b.eval('ktrace.frameMs(5)')
        b.eval('ktrace.zoomAt(100)')
        r['pan'] = b.eval('(function(){var t=[];for(var i=0;i<20;i++){ktrace.pan(i%2?-250:250);'
                          't.push(ktrace.frameMs(1));}t.sort(function(a,b){return a-b});'
                          'return t[t.length>>1];})()')
        r['heap'] = b.eval('performance.memory ? performance.memory.usedJSHeapSize / 1048576 : 0')
        # Search (issue 18): what the page took per query (ktrace.search's
        # own ms: matching names, one pass over every call, the 500 longest),
        # for an exact name, a substring, a regex and a min duration.
        names = b.eval('ktrace.files[0].funcs.slice(0, 50)')
        name = max(names, key=len) if names else 'x'
        qs = [(name, ''), (name[:3], ''), ('/^node[0-9]$/', ''), ('', '1us')]
        r['search'] = []
        for q, mn in qs:
            ms = []
            for _ in range(3):
                x = b.eval('ktrace.search(%s, %s, "")' % (json.dumps(q), json.dumps(mn)))
                ms.append(x['ms'])
            r['search'].append((q or '(any)', mn, x['count'], statistics.median(ms)))
        b.eval('ktrace.search("")')
        # A range over the whole window (every call clipped, its caller's
        # self time), and the requests panel, ms.
        r['range'] = b.eval('(function(){var v=ktrace.view(),t=performance.now();'
                            'ktrace.selectRange(v.start,v.end);return performance.now()-t;})()')
        r['requests'] = b.eval('(function(){var t=performance.now();ktrace.requests();'
                               'return performance.now()-t;})()')
        errs = b.errors()
        if errs:
            r['errors'] = errs
        return r
    finally:
        b.close()


def main():
    page = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rs = [once(page) for _ in range(runs)]
    med = lambda k: statistics.median(x[k] for x in rs)  # noqa: E731
    print('chromium, %d runs, %d calls: open %.0f ms = reading and parsing the HTML %.0f ms + '
          'the script %.0f ms (JSON.parse %.0f ms, unpacking %.0f ms, the rest and the first frame)'
          % (runs, rs[0]['calls'], med('open'), med('parse'), med('unpack'), med('json'),
             med('decode')))
    print('CPU time of the browser while opening (all its processes): %.0f ms; on a shared '
          'machine this is the figure to compare' % med('cpu'))
    print('frame: whole window %.1f ms, zoomed in 100x %.1f ms, panning %.1f ms; JS heap %.0f MiB'
          % (med('whole'), med('zoomed'), med('pan'), med('heap')))
    print('a range over the whole window: %.0f ms; the requests panel: %.0f ms'
          % (med('range'), med('requests')))
    for i, (q, mn, n, _) in enumerate(rs[0]['search']):
        print('search %-24s %-5s %9d matches: %.0f ms' % (q, mn or '', n,
                                                         statistics.median(x['search'][i][3] for x in rs)))
    for x in rs:
        for e in x.get('errors', []):
            print('console error: ' + e)


if __name__ == '__main__':
    main()
