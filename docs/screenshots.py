#!/usr/bin/env python3
"""docs/screenshots.py DECODER SNAPSHOT [OUTDIR] - the screenshots of
docs/viewer.md: the HTML timeline of a trigger snapshot (the demo's:
examples/demo.sh writes one to build/demo-out/) in headless Chromium,
1280x780, through the DevTools driver of tests/html/pagecheck.py.

    docs/screenshots.py build/decoder/ktrace-decode build/demo-out/ktrace-*.ktrace

Writes OUTDIR (default docs/) viewer-*.png and timeline.png (the README's:
the slow request, as "Go to the slow request" shows it)."""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'html'))
from pagecheck import Browser  # noqa: E402

W, H = 1280, 780


def main(argv):
    dec, snap = argv[1], argv[2]
    out = argv[3] if len(argv) > 3 else HERE
    tmp = tempfile.mkdtemp(prefix='ktrace-shots-')
    page = os.path.join(tmp, 'timeline.html')
    subprocess.run([dec, '--format', 'html', '-q', '-o', page, snap], check=True)
    b = Browser(W, H)
    try:
        b.open('file://' + page, W, H)
        deadline = time.time() + 60
        while not b.eval("!!document.getElementById('status') && "
                         "document.getElementById('status').dataset.ready === '1'"):
            if time.time() > deadline:
                raise RuntimeError('the page never became ready')
            time.sleep(0.05)

        def shot(name):
            hover(1, 1)             # no tooltip left over
            time.sleep(0.2)
            b.screenshot(os.path.join(out, name))
            print(os.path.join(out, name))

        def hover(x, y):
            b.send('Input.dispatchMouseEvent', {'type': 'mouseMoved', 'x': x, 'y': y})

        shot('viewer-window.png')
        # The slow request: its calls drawn, off-CPU under them, the split.
        b.eval('ktrace.gotoTrigger()')
        shot('timeline.png')
        # The deepest long call of the request, clicked: on-CPU / blocked /
        # preempted in the details; a merged block hovered.
        sp = b.eval('(function(){var t=ktrace.triggerSpan();return t;})()')
        loc = b.eval("(function(){var fs=ktrace.files[0].funcs;var best=null;"
                     "['compact_log','log_append','handle_put'].forEach(function(n){"
                     "if(!best&&fs.indexOf(n)>=0)best=n;});return best;})()")
        if loc and sp:
            b.eval('ktrace.setView(%f, %f)' % (sp['start'] + (sp['end'] - sp['start']) * 0.25,
                                               sp['start'] + (sp['end'] - sp['start']) * 0.55))
            c = b.eval('JSON.stringify(ktrace.callSpan(%r, 0))' % loc)
            import json
            c = json.loads(c)
            r = json.loads(b.eval("JSON.stringify(ktrace.rowRect(%d, %d))" % (c['tid'], c['depth'])))
            rect = json.loads(b.eval("JSON.stringify(document.getElementById('canvas')"
                                     ".getBoundingClientRect())"))
            x = rect['left'] + b.eval('ktrace.xOf(%f)' % ((c['start'] + c['end']) / 2))
            y = rect['top'] + r['y'] + r['h'] / 2
            b.click(x, y)
            hover(x, y)
            time.sleep(0.2)
            b.screenshot(os.path.join(out, 'viewer-offcpu.png'))
            print(os.path.join(out, 'viewer-offcpu.png'))
        # Search: a function with a minimum duration, the list by duration.
        b.eval("ktrace.search('queue_pop', '100us', '')")
        b.eval('ktrace.fit()')
        shot('viewer-search.png')
        b.eval("ktrace.search('')")
        # Requests: by kind, a histogram each, the slow ones marked.
        b.eval('ktrace.requests()')
        shot('viewer-requests.png')
        # A range across the slow request: per function and thread inside it.
        if sp:
            b.eval('ktrace.gotoTrigger()')
            b.eval('ktrace.selectRange(%f, %f)' % (sp['start'], sp['end']))
            shot('viewer-range.png')
    finally:
        b.close()
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
