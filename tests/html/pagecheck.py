#!/usr/bin/env python3
"""pagecheck.py - open a ktrace HTML timeline in headless Chromium and report
what a person would see, for tests/test_e2e_html.c.

    pagecheck.py PAGE SHOTDIR NAME [--search FUNC]... [--click FUNC:NTH]...
                 [--trigger] [--size WxH]

Drives the page over the DevTools protocol (--remote-debugging-pipe: fd 3
carries commands to the browser, fd 4 its answers, each a JSON message ended
by a NUL byte), with real mouse clicks and typed text, and prints one line
per observation, fields separated by tabs:

    ready   LOAD_MS CALLS              the page finished drawing
    error   TEXT                       a console error or uncaught exception
    row     KIND TEXT                  a row label (thread, core, requests, ...)
    header  TEXT                       the header's text
    search  FUNC TYPED NEXT            count text after typing FUNC, after "next"
    click   FUNC NTH PAGE_NS DETAILS   a click on the NTH call of FUNC: the
                                       duration the page computed, the details
    trigger IN_VIEW FRACTION DETAILS   after "Go to the slow request": is the
                                       request inside the view, its share of
                                       the view's width, the details
    shot    PATH                       a screenshot (one per case)

Exit status 0 if the browser ran (the caller judges the observations), 2 if
it could not be started or the page never became ready.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Browser:
    def __init__(self, width, height):
        exe = shutil.which('chromium') or shutil.which('chromium-browser') or \
            shutil.which('google-chrome')
        if not exe:
            raise RuntimeError('no chromium in PATH (apt-get install chromium)')
        self.profile = tempfile.mkdtemp(prefix='ktrace-chromium-')
        to_r, to_w = os.pipe()      # we write commands, the browser reads fd 3
        from_r, from_w = os.pipe()  # the browser writes fd 4, we read
        args = [exe, '--headless=new', '--no-sandbox', '--disable-gpu',
                '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check',
                '--disable-extensions', '--mute-audio', '--hide-scrollbars',
                '--user-data-dir=' + self.profile, '--remote-debugging-pipe',
                '--window-size=%d,%d' % (width, height), 'about:blank']

        def fds():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)
        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=fds,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.w = os.fdopen(to_w, 'wb', buffering=0)
        self.r = os.fdopen(from_r, 'rb', buffering=0)
        self.buf = b''
        self.next_id = 0
        self.events = []
        self.session = None

    def _read_msg(self, deadline):
        while b'\0' not in self.buf:
            if time.time() > deadline:
                raise RuntimeError('browser did not answer in time')
            chunk = self.r.read(65536)
            if not chunk:
                raise RuntimeError('browser closed the pipe')
            self.buf += chunk
        msg, self.buf = self.buf.split(b'\0', 1)
        return json.loads(msg)

    def send(self, method, params=None, session=True, timeout=60):
        self.next_id += 1
        msg = {'id': self.next_id, 'method': method, 'params': params or {}}
        if session and self.session:
            msg['sessionId'] = self.session
        self.w.write(json.dumps(msg).encode() + b'\0')
        deadline = time.time() + timeout
        while True:
            m = self._read_msg(deadline)
            if m.get('id') == self.next_id:
                if 'error' in m:
                    raise RuntimeError('%s: %s' % (method, m['error']))
                return m.get('result', {})
            if 'method' in m:
                self.events.append(m)

    def pump(self, seconds):
        """Collect events for a while (console messages arrive as events)."""
        self.send('Runtime.evaluate', {'expression': '1'}, timeout=seconds + 30)

    def eval(self, expr):
        r = self.send('Runtime.evaluate', {'expression': expr, 'returnByValue': True,
                                           'awaitPromise': True})
        if 'exceptionDetails' in r:
            raise RuntimeError('evaluate %s: %s' % (expr, r['exceptionDetails']))
        return r['result'].get('value')

    def open(self, url, width, height):
        targets = self.send('Target.getTargets', session=False)['targetInfos']
        page = next(t for t in targets if t['type'] == 'page')
        self.session = self.send('Target.attachToTarget', {'targetId': page['targetId'],
                                                           'flatten': True},
                                 session=False)['sessionId']
        for domain in ('Runtime', 'Log', 'Page'):
            self.send(domain + '.enable')
        self.send('Emulation.setDeviceMetricsOverride', {'width': width, 'height': height,
                                                         'deviceScaleFactor': 1,
                                                         'mobile': False})
        self.send('Page.navigate', {'url': url})

    def click(self, x, y):
        for kind in ('mouseMoved', 'mousePressed', 'mouseReleased'):
            self.send('Input.dispatchMouseEvent', {'type': kind, 'x': x, 'y': y,
                                                   'button': 'left', 'clickCount': 1})

    def click_element(self, selector):
        rect = self.eval('(function(){var r=document.querySelector(%s).getBoundingClientRect();'
                         'return [r.left+r.width/2, r.top+r.height/2];})()' % json.dumps(selector))
        self.click(rect[0], rect[1])

    def screenshot(self, path):
        data = self.send('Page.captureScreenshot', {'format': 'png'})['data']
        with open(path, 'wb') as f:
            f.write(base64.b64decode(data))
        return path

    def errors(self):
        out = []
        for e in self.events:
            m, p = e.get('method'), e.get('params', {})
            if m == 'Runtime.exceptionThrown':
                d = p['exceptionDetails']
                out.append('exception: ' + d.get('exception', {}).get('description', d.get('text', '')))
            elif m == 'Runtime.consoleAPICalled' and p.get('type') in ('error', 'assert'):
                out.append('console.%s: %s' % (p['type'], ' '.join(
                    str(a.get('value', a.get('description', ''))) for a in p.get('args', []))))
            elif m == 'Log.entryAdded' and p['entry'].get('level') == 'error':
                out.append('log: ' + p['entry'].get('text', ''))
        self.events = []
        return out

    def close(self):
        try:
            self.send('Browser.close', session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def out(*fields):
    print('\t'.join(str(f).replace('\t', ' ').replace('\n', ' | ') for f in fields), flush=True)


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    page, shots, name = os.path.abspath(argv[1]), argv[2], argv[3]
    searches, clicks, trigger, width, height = [], [], False, 1400, 900
    i = 4
    while i < len(argv):
        a = argv[i]
        if a == '--search':
            searches.append(argv[i + 1]); i += 2
        elif a == '--click':
            f, n = argv[i + 1].rsplit(':', 1); clicks.append((f, int(n))); i += 2
        elif a == '--trigger':
            trigger = True; i += 1
        elif a == '--size':
            width, height = (int(v) for v in argv[i + 1].split('x')); i += 2
        else:
            print('pagecheck.py: unknown argument ' + a, file=sys.stderr)
            return 2
    os.makedirs(shots, exist_ok=True)
    try:
        b = Browser(width, height)
    except Exception as e:
        print('pagecheck.py: cannot start the browser: %s' % e, file=sys.stderr)
        return 2
    try:
        b.open('file://' + page, width, height)
        deadline = time.time() + 60
        while not b.eval("document.getElementById('status') && "
                         "document.getElementById('status').dataset.ready === '1'"):
            if time.time() > deadline:
                for e in b.errors():
                    out('error', e)
                print('pagecheck.py: the page never became ready', file=sys.stderr)
                return 2
            time.sleep(0.05)
        b.pump(0)
        out('ready', '%.0f' % b.eval('ktrace.loadMs'), b.eval('ktrace.calls'))
        out('header', b.eval("document.getElementById('hdr').innerText"))
        for kind, text in b.eval("Array.from(document.querySelectorAll('.row-label'))"
                                 ".map(function(e){return [e.classList[1], e.innerText];})"):
            out('row', kind, text)
        out('shot', b.screenshot(os.path.join(shots, name + '-load.png')))
        for e in b.errors():
            out('error', e)

        for f in searches:
            b.click_element('#search')
            b.eval("document.getElementById('search').select()")
            b.send('Input.insertText', {'text': f})
            # the page searches 150 ms after the last keystroke
            while b.eval('!!(ktrace.searchPending && ktrace.searchPending())'):
                time.sleep(0.05)
            typed = b.eval("document.getElementById('search-count').innerText")
            b.click_element('#next')
            nxt = b.eval("document.getElementById('search-count').innerText")
            out('search', f, typed, nxt)
            out('shot', b.screenshot(os.path.join(shots, '%s-search-%s.png' % (name, f))))
            b.eval("document.getElementById('search').value='';"
                   "document.getElementById('search').dispatchEvent(new Event('input'))")

        for f, n in clicks:
            loc = b.eval('JSON.stringify(ktrace.locateCall(%s, %d))' % (json.dumps(f), n))
            loc = json.loads(loc) if loc else None
            if not loc:
                out('click', f, n, -1, 'no such call')
                continue
            b.eval("document.getElementById('search').value='';"
                   "document.getElementById('search').dispatchEvent(new Event('input'))")
            # the cleared search runs 150 ms later and redraws: click after it,
            # or on a loaded machine it can land after the click and reset
            # the details
            while b.eval('!!(ktrace.searchPending && ktrace.searchPending())'):
                time.sleep(0.05)
            b.click(loc['x'], loc['y'])
            details = b.eval("document.getElementById('details').innerText")
            out('click', f, n, loc['durationNs'], details)
            out('shot', b.screenshot(os.path.join(shots, '%s-click-%s.png' % (name, f))))

        if trigger:
            visible = b.eval("!document.getElementById('goto-trigger').hidden")
            if not visible:
                out('trigger', 0, 0, 'no "Go to the slow request" button')
            else:
                b.click_element('#goto-trigger')
                v = b.eval('JSON.stringify([ktrace.view(), ktrace.triggerSpan()])')
                view, span = json.loads(v)
                inside = span['start'] >= view['start'] and span['end'] <= view['end']
                frac = (span['end'] - span['start']) / (view['end'] - view['start'])
                details = b.eval("document.getElementById('details').innerText")
                out('trigger', 1 if inside else 0, '%.3f' % frac, details)
                out('shot', b.screenshot(os.path.join(shots, name + '-trigger.png')))
        b.pump(0)
        for e in b.errors():
            out('error', e)
        return 0
    except Exception as e:
        print('pagecheck.py: %s' % e, file=sys.stderr)
        return 2
    finally:
        b.close()


if __name__ == '__main__':
    sys.exit(main(sys.argv))
