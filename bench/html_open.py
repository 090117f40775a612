#!/usr/bin/env python3
"""html_open.py PAGE [RUNS] - open a ktrace HTML timeline in headless
Chromium RUNS times (default 3) and print the medians: time to open
(navigation start to the first frame drawn), of which unpacking and the
first frame, and the time to draw one frame over the whole window, zoomed
in 100x, and while panning (20 pans of a fifth of the view).  Uses the
DevTools driver of tests/html/pagecheck.py; figures, never a verdict."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'html'))
from pagecheck import Browser  # noqa: E402


def once(page):
    b = Browser(1400, 900)
    try:
        b.open('file://' + os.path.abspath(page), 1400, 900)
        deadline = time.time() + 300
        while not b.eval("!!document.getElementById('status') && "
                         "document.getElementById('status').dataset.ready === '1'"):
            if time.time() > deadline:
                raise RuntimeError('page never became ready')
            time.sleep(0.05)
        r = {'open': b.eval('ktrace.openMs'), 'unpack': b.eval('ktrace.loadMs'),
             'calls': b.eval('ktrace.calls'), 'whole': b.eval('ktrace.frameMs(5)')}
        b.eval('ktrace.zoomAt(0.01)')
        r['zoomed'] = b.eval('ktrace.frameMs(5)')
        b.eval('ktrace.zoomAt(100)')
        r['pan'] = b.eval('(function(){var t=[];for(var i=0;i<20;i++){ktrace.pan(i%2?-250:250);'
                          't.push(ktrace.frameMs(1));}t.sort(function(a,b){return a-b});'
                          'return t[t.length>>1];})()')
        r['heap'] = b.eval('performance.memory ? performance.memory.usedJSHeapSize / 1048576 : 0')
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
    print('chromium, %d runs, %d calls: open %.0f ms (unpack + first frame %.0f ms); '
          'frame: whole window %.1f ms, zoomed in 100x %.1f ms, panning %.1f ms; JS heap %.0f MiB'
          % (runs, rs[0]['calls'], med('open'), med('unpack'), med('whole'), med('zoomed'),
             med('pan'), med('heap')))
    for x in rs:
        for e in x.get('errors', []):
            print('console error: ' + e)


if __name__ == '__main__':
    main()
