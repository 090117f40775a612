/*
 * timeline.js - the ktrace HTML timeline (ktrace-decode --format html).
 *
 * The decoder puts its data into <script class="ktrace-data"> elements,
 * pieces of one JSON text (layout: the comment at the top of
 * decoder/out-html.c).  This script unpacks it into
 * typed arrays and draws it on a canvas:
 *
 *   rows     per file: a row per core (which thread ran there), then per
 *            thread a header row (name, tid, marks), a requests row if the
 *            thread has requests, and one row per call depth (flame chart,
 *            depth downwards).
 *   time     "page ns": ns since the earliest window start of all files.
 *            A file's tick t is at off + t * nsPerTick (linear, like the
 *            chrome output); a call's start in its details is the exact
 *            wall clock ktrace-decode prints (anchors, BigInt).
 *   drawing  per row, only what is in view: a binary search finds the first
 *            call, and a call narrower than a pixel is drawn as that pixel's
 *            one block, after which the search jumps to the next pixel; a
 *            frame costs O(rows x pixels x log calls), whatever the window.
 *
 * window.ktrace is the page's small API (state and a few actions), used by
 * the browser tests in tests/html/ and handy from the devtools console.
 */
'use strict';
(function () {
  var LABEL_W = 190;          // px: the row-label column
  var H_SECTION = 18, H_CORE = 16, H_THREAD = 18, H_REQ = 15, H_DEPTH = 15;
  var MIN_SPAN_NS = 50;       // deepest zoom: 50 ns across the view
  var FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif';

  var $ = function (id) { return document.getElementById(id); };
  var t_start = performance.now();

  // ---- formatting -------------------------------------------------------

  // Like kd_time_fmt_dur() in the decoder: "950 ns", "12.345 us", ...
  function fmtDur(ns) {
    if (ns < 1000) return Math.round(ns) + ' ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(3) + ' us';
    if (ns < 1e9) return (ns / 1e6).toFixed(3) + ' ms';
    return (ns / 1e9).toFixed(3) + ' s';
  }
  // BigInt ns since the epoch -> "HH:MM:SS.nnnnnnnnn" (UTC), date optional.
  function fmtWall(ns, date) {
    var sec = ns / 1000000000n, frac = ns % 1000000000n;
    if (frac < 0n) { frac += 1000000000n; sec -= 1n; }
    var iso = new Date(Number(sec) * 1000).toISOString();
    var s = iso.slice(11, 19) + '.' + frac.toString().padStart(9, '0');
    return date ? iso.slice(0, 10) + ' ' + s : s;
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c];
    });
  }
  function hashStr(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }
  function hsl(h, s, l) { return 'hsl(' + h + ',' + s + '%,' + l + '%)'; }

  // ---- unpacking ----------------------------------------------------------

  // base64 -> bytes, straight from the string (no atob string between).
  var B64 = new Uint8Array(128);
  'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.split('')
    .forEach(function (c, i) { B64[c.charCodeAt(0)] = i; });
  function base64Bytes(s) {
    var len = s.length, pad = len && s[len - 1] === '=' ? (s[len - 2] === '=' ? 2 : 1) : 0;
    var out = new Uint8Array(len / 4 * 3 - pad), o = 0, i = 0, v;
    for (; i + 4 <= len - (pad ? 4 : 0); i += 4) {
      v = B64[s.charCodeAt(i)] << 18 | B64[s.charCodeAt(i + 1)] << 12 |
          B64[s.charCodeAt(i + 2)] << 6 | B64[s.charCodeAt(i + 3)];
      out[o++] = v >> 16; out[o++] = v >> 8 & 255; out[o++] = v & 255;
    }
    if (pad) {
      v = B64[s.charCodeAt(i)] << 18 | B64[s.charCodeAt(i + 1)] << 12 |
          (pad < 2 ? B64[s.charCodeAt(i + 2)] << 6 : 0);
      out[o++] = v >> 16;
      if (pad < 2) out[o++] = v >> 8 & 255;
    }
    return out;
  }
  // LEB128 reader over a byte array; numbers stay exact up to 2^53.
  function Reader(bytes) { this.b = bytes; this.p = 0; }
  Reader.prototype.uv = function () {
    var b = this.b, p = this.p, x = b[p++], v = x & 127, mul = 128;
    while (x & 128) { x = b[p++]; v += (x & 127) * mul; mul *= 128; }
    this.p = p;
    return v;
  };

  // One thread's calls, stored depth-major: lane d is [lane[d], lane[d+1])
  // of every array, sorted by begin (calls at one depth never overlap).
  function unpackCalls(th) {
    var n = th.n, nd = th.maxdepth + 1, bytes = base64Bytes(th.calls);
    var lane = new Uint32Array(nd + 1), r, depth = 0, i, v;
    for (i = 0; i < nd && th.lanes; i++) lane[i + 1] = lane[i] + th.lanes[i];
    var pos = lane.slice(0, nd);
    th.begin = new Float64Array(n); th.end = new Float64Array(n);
    th.func = new Uint32Array(n); th.core = new Uint16Array(n); th.flags = new Uint8Array(n);
    th.lane = lane;
    r = new Reader(bytes);
    var b = th.b0, core = 0, k, dur;
    for (i = 0; i < n; i++) {
      v = r.uv();
      // head = zigzag(depth delta) << 5 | core changed << 4 | flags
      var zz = Math.floor(v / 32);
      depth += (zz & 1) ? -((zz + 1) / 2) : zz / 2;
      if (v & 16) core = r.uv();
      b += r.uv(); dur = r.uv();
      k = pos[depth]++;
      th.begin[k] = b; th.end[k] = b + dur; th.func[k] = r.uv();
      th.core[k] = core; th.flags[k] = v & 15;
    }
    th.calls = null;
  }

  // A thread's off-CPU intervals (out-html.c thread_offcpu): why, begin
  // delta, duration; and per interval the deepest call open during it (the
  // stack does not change while the thread is off the cpu), so the depth
  // rows can show it under the calls that waited.
  var COL_BLOCKED = '#ea580c', COL_PREEMPTED = '#7c3aed';
  function unpackOff(th) {
    var n = th.noff || 0, r = new Reader(base64Bytes(th.off || '')), b = 0;
    th.offB = new Float64Array(n); th.offE = new Float64Array(n); th.offWhy = new Uint8Array(n);
    for (var i = 0; i < n; i++) {
      th.offWhy[i] = r.uv(); b += r.uv(); th.offB[i] = b; th.offE[i] = b + r.uv();
    }
    th.off = null;
    // The stack's depth in the middle of each interval: calls nest, so if
    // depth d has a call there every shallower depth has one; a binary
    // search over the depths, each a binary search over its lane.
    th.offDepth = new Int32Array(n).fill(-1);
    function covered(d, t) {
      var lo = th.lane[d], hi = th.lane[d + 1], a = lo, z = hi;
      while (a < z) { var m = (a + z) >>> 1; if (th.end[m] < t) a = m + 1; else z = m; }
      return a < hi && th.begin[a] <= t;
    }
    for (i = 0; i < n && th.n; i++) {
      var t = (th.offB[i] + th.offE[i]) / 2, lo = -1, hi = th.maxdepth;   // covered(lo), not beyond hi
      if (!covered(0, t)) continue;
      lo = 0;
      while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (covered(mid, t)) lo = mid; else hi = mid - 1; }
      th.offDepth[i] = lo;
    }
  }
  // Off-CPU ticks of a thread inside [b, e): [blocked, preempted].
  function offIn(th, b, e) {
    var out = [0, 0], a = 0, z = th.offB.length;
    while (a < z) { var m = (a + z) >>> 1; if (th.offE[m] <= b) a = m + 1; else z = m; }
    for (; a < th.offB.length && th.offB[a] < e; a++)
      out[th.offWhy[a]] += Math.min(e, th.offE[a]) - Math.max(b, th.offB[a]);
    return out;
  }

  function unpackRuns(core) {
    var r = new Reader(base64Bytes(core.runs)), n = core.n, b = core.b0;
    core.begin = new Float64Array(n); core.end = new Float64Array(n);
    core.thread = new Uint32Array(n);
    for (var i = 0; i < n; i++) {
      core.thread[i] = r.uv(); b += r.uv();
      core.begin[i] = b; core.end[i] = b + r.uv();
    }
    core.runs = null;
    // Exact occupancy from the context switches replaces the runs of
    // records: which of the process's threads ran, and (between them,
    // inside sched) another process or idle.
    if (core.on !== undefined) {
      r = new Reader(base64Bytes(core.on)); n = core.non; b = 0;
      core.begin = new Float64Array(n); core.end = new Float64Array(n);
      core.thread = new Uint32Array(n);
      for (i = 0; i < n; i++) {
        core.thread[i] = r.uv(); b += r.uv();
        core.begin[i] = b; core.end[i] = b + r.uv();
      }
      core.n = n; core.exact = true; core.on = null;
      // The gaps: another process or idle.
      var gb = [], ge = [], at = core.sched[0];
      for (i = 0; i < n; i++) { if (core.begin[i] > at) { gb.push(at); ge.push(core.begin[i]); } at = Math.max(at, core.end[i]); }
      if (core.sched[1] > at) { gb.push(at); ge.push(core.sched[1]); }
      core.idleB = new Float64Array(gb); core.idleE = new Float64Array(ge);
    }
  }

  // ---- time -------------------------------------------------------------

  function Clock(f) {
    this.hz = BigInt(f.hz); this.shift = BigInt(f.shift); this.t0 = BigInt(f.t0);
    this.wall0 = BigInt(f.wall0);
    this.nsPerTick = f.hz !== '0' ? Math.pow(2, f.shift) * 1e9 / Number(f.hz) : 1;
    this.anchors = f.anchors.map(function (a) { return [BigInt(a[0]), BigInt(a[1])]; });
    this.snapTsc = BigInt(f.snap_tsc); this.snapRt = BigInt(f.snap_rt);
  }
  // Ticks (a difference) -> ns, as kd_time_ticks_ns().
  Clock.prototype.durNs = function (ticks) {
    if (this.hz === 0n || ticks <= 0) return 0;
    return Number((BigInt(Math.round(ticks)) << this.shift) * 1000000000n / this.hz);
  };
  // Tick since the window start -> BigInt wall ns, as kd_time_wall_ns().
  Clock.prototype.wall = function (tick) {
    var tsc = (this.t0 + BigInt(tick)) << this.shift, a = this.anchors, n = a.length;
    var hz = this.hz || 1000000000n;
    var ext = function (t0, r0) { return r0 + (tsc - t0) * 1000000000n / hz; };
    if (!n) return ext(this.snapTsc, this.snapRt);
    if (tsc <= a[0][0]) return ext(a[0][0], a[0][1]);
    if (tsc >= a[n - 1][0]) return ext(a[n - 1][0], a[n - 1][1]);
    var lo = 0, hi = n - 1;
    while (hi - lo > 1) { var mid = (lo + hi) >> 1; if (a[mid][0] <= tsc) lo = mid; else hi = mid; }
    return a[lo][1] + (tsc - a[lo][0]) * (a[hi][1] - a[lo][1]) / (a[hi][0] - a[lo][0]);
  };

  // ---- the model ----------------------------------------------------------

  var phase = {};     // ms per loading phase (bench/html_open.py)
  var pieces = Array.prototype.slice.call(document.querySelectorAll('script.ktrace-data'));
  var data = JSON.parse(pieces.map(function (e) { return e.textContent; }).join(''));
  pieces.forEach(function (e) { e.textContent = ''; });   // free the text
  phase.json = performance.now() - t_start;
  var files = data.files, origin = null, nCalls = 0;
  var sched = false;   // some file has context switches
  files.forEach(function (f) { var w = BigInt(f.wall0); if (origin === null || w < origin) origin = w; });
  if (origin === null) origin = 0n;
  var pageEnd = 0;
  files.forEach(function (f, fi) {
    f.index = fi;
    f.clock = new Clock(f);
    f.sched = /^scheduling: recorded/.test(f.sched_status || '');
    if (f.sched) sched = true;
    f.off = Number(f.clock.wall0 - origin);
    f.k = f.clock.nsPerTick;
    pageEnd = Math.max(pageEnd, f.off + f.span * f.k);
    f.threads.forEach(function (th, ti) {
      th.file = f; th.index = ti; unpackCalls(th); unpackOff(th); nCalls += th.n;
      th.folded = false; th.reqs = [];
      th.hue = hashStr(th.name + '/' + th.tid) % 360;
    });
    f.cores.forEach(function (c) { c.file = f; unpackRuns(c); });
    f.reqs.forEach(function (q, qi) {
      // [row, begin, end, kind, "id", flags, core, end row]
      var r = { file: f, index: qi, row: q[0], begin: q[1], end: q[2], kind: q[3], id: q[4],
                flags: q[5], core: q[6], endRow: q.length > 7 ? q[7] : q[0] };
      f.reqs[qi] = r;
      if (r.row >= 0) f.threads[r.row].reqs.push(r);
    });
    f.marks = f.marks.map(function (m) {
      return { file: f, row: m[0], tick: m[1], name: m[2], value: m[3], core: m[4] };
    });
    f.threads.forEach(function (th) {
      th.marks = [];
      // Requests that overlap (nested, or handed over) go to lanes: the
      // first whose last request ended before this one begins.
      th.reqLanes = [];
      th.reqs.slice().sort(function (a, b) { return a.begin - b.begin; }).forEach(function (q) {
        var l = 0;
        while (l < th.reqLanes.length && th.reqLanes[l].last >= q.begin) l++;
        if (l === th.reqLanes.length) th.reqLanes.push({ q: [], last: -Infinity });
        th.reqLanes[l].q.push(q); th.reqLanes[l].last = q.end; q.lane = l;
      });
      th.reqLanes.forEach(function (ln) {
        ln.b = new Float64Array(ln.q.map(function (x) { return x.begin; }));
        ln.e = new Float64Array(ln.q.map(function (x) { return x.end; }));
      });
    });
    f.marks.forEach(function (m) { f.threads[m.row].marks.push(m); });
    f.funcColor = f.funcs.map(function (name) { return hashStr(name) % 360; });
    f.textW = new Float32Array(f.funcs.length).fill(-1);
    f.trig = f.trigger && f.trigger.req >= 0 ? f.reqs[f.trigger.req] : null;
  });
  if (pageEnd <= 0) pageEnd = 1000;
  phase.unpack = performance.now() - t_start - phase.json;
  function nsOf(f, tick) { return f.off + tick * f.k; }
  function tickOf(f, ns) { return (ns - f.off) / f.k; }
  function nameOf(f, id) { return f.names[id] !== undefined ? f.names[id] : 'name#' + id; }
  function threadLabel(th) { return th.name + ' (' + th.tid + ')'; }

  // ---- header -----------------------------------------------------------

  function buildHeader() {
    var h = '';
    files.forEach(function (f) {
      var c = f.clock, exe = f.exe.split('/').pop() || 'process';
      var dur = c.durNs(f.span), nreq = f.reqs.length;
      var calls = f.threads.reduce(function (s, t) { return s + t.n; }, 0);
      h += '<div class="file"><div><span class="title">' + esc(exe) + '</span> pid ' + f.pid +
        ' on ' + esc(f.host || '?') + ' <span class="k">&middot; file</span> <span class="mono">' +
        esc(f.file) + '</span></div>';
      h += '<div><span class="k">window</span> <span class="mono">' + fmtWall(c.wall(0), true) +
        ' .. ' + fmtWall(c.wall(f.span), false) + ' UTC</span> (' + fmtDur(dur) + ')' +
        (f.all ? ' <span class="warn">--all: includes partial data</span>' : '') +
        ' <span class="k">&middot; reason</span> ' + esc(f.reason || '?') +
        ' <span class="k">&middot;</span> ' + f.threads.length + ' threads, ' + calls +
        ' calls, ' + nreq + ' requests, ' + f.marks.length + ' marks</div>';
      if (f.trigger) {
        var t = f.trigger, on = f.trig && f.trig.row >= 0 ? f.threads[f.trig.row] : null;
        h += '<div class="trig">trigger: slow "' + esc(t.kind) + '" request #' + esc(t.id) +
          (on ? ' on ' + esc(threadLabel(on)) : ' (tid ' + t.tid + ')') + ': ' +
          fmtDur(t.duration_ns) + ' &gt; threshold ' + fmtDur(t.threshold_ns) +
          (t.suppressed ? ' (' + t.suppressed + ' more suppressed by the rate limit)' : '') + '</div>';
      }
      var loss = f.losses.map(function (l) { return esc(l[0]) + ' ' + l[1]; });
      if (f.damaged) loss.push('damaged blocks ' + f.damaged);
      if (f.dropped) loss.push(f.dropped + ' older records before the complete window');
      if (f.dropped_after) loss.push(f.dropped_after + ' newer records after the first core copy');
      if (f.lost_exits) loss.push('lost exits ' + f.lost_exits);
      if (f.unmatched_exits) loss.push('exits without entry ' + f.unmatched_exits);
      // What the window does not hold: losses, and functions the window
      // budget muted (their calls after muting are not recorded; their
      // time is in their callers' self time) or KTRACE_EXCLUDE excluded.
      var muted = (f.muted || []).filter(function (m) { return m.why !== 'excluded'; });
      var excl = (f.muted || []).filter(function (m) { return m.why === 'excluded'; });
      h += '<div id="losses"><span class="k">not recorded</span> ' +
        (loss.length || muted.length || excl.length ? '' : 'nothing: no losses, nothing muted') +
        (loss.length ? '<span class="warn">losses: ' + loss.join(', ') + '</span>' : '') +
        (muted.length ? (loss.length ? ' <span class="k">&middot;</span> ' : '') +
          '<span class="warn" title="' + esc(muted.map(function (m) { return m.name; }).join('\n')) + '">muted by the window budget: ' +
          muted.length + ' function' + (muted.length > 1 ? 's' : '') +
          (f.muted_calls ? ', ' + f.muted_calls.toLocaleString('en-US') + ' calls not recorded since' : '') + ' (' +
          muted.slice(0, 6).map(function (m) { return esc(m.name); }).join(', ') + (muted.length > 6 ? ', &hellip;' : '') +
          '; their time is in their callers\' self time)</span>' : '') +
        (excl.length ? ' <span class="k">&middot;</span> <span class="warn">excluded (KTRACE_EXCLUDE): ' +
          excl.map(function (m) { return esc(m.name); }).join(', ') + '</span>' : '') +
        (f.warnings ? ' <span class="k">&middot;</span> <span class="warn">' + f.warnings +
          ' decoder warnings (see ktrace-decode on stderr)</span>' : '') + '</div>';
      h += '<div><span class="k">off-CPU</span> ' + (f.sched ?
        esc(f.sched_status.replace(/^scheduling: /, '')) + ': <span class="legend" style="background:' + COL_BLOCKED +
        '"></span>blocked <span class="legend" style="background:' + COL_PREEMPTED + '"></span>preempted on each thread, ' +
        'and which thread ran on each cpu' :
        '<span class="warn">' + esc((f.sched_status || 'scheduling: not recorded').replace(/^scheduling: /, '')) + '</span>') +
        ' <span class="k">&middot; calls narrower than a pixel are drawn merged, one block per pixel (hover: how many)</span></div>';
      h += '</div>';
    });
    if (!files.length) h = '<div class="warn">No snapshot could be decoded.</div>';
    $('hdr').innerHTML = h;
    if (files.some(function (f) { return f.trig; })) $('goto-trigger').hidden = false;
  }

  // ---- layout -------------------------------------------------------------

  var rows = [], totalH = 0;
  function layout() {
    rows = []; var y = 0;
    function add(r, h) { r.y = y; r.h = h; y += h; rows.push(r); }
    files.forEach(function (f) {
      add({ kind: 'section', file: f, label: (f.exe.split('/').pop() || 'process') + ' ' + f.pid + ': cores' }, H_SECTION);
      f.cores.forEach(function (c) { add({ kind: 'core', file: f, core: c, label: 'cpu ' + c.cpu }, H_CORE); });
      f.threads.forEach(function (th) {
        add({ kind: 'thread', file: f, th: th }, H_THREAD);
        th.reqLanes.forEach(function (ln, l) {
          add({ kind: 'reqs', file: f, th: th, lane: l, label: l ? 'requests ' + (l + 1) : 'requests' }, H_REQ);
        });
        th.depthRow0 = rows.length;
        if (!th.folded)
          for (var d = 0; d <= th.maxdepth && th.n; d++)
            add({ kind: 'depth', file: f, th: th, depth: d }, H_DEPTH);
      });
    });
    totalH = y;
    var html = '';
    rows.forEach(function (r, i) {
      if (r.kind === 'depth') return;
      var cls = r.kind === 'reqs' ? 'requests' : r.kind;
      var text = r.kind === 'thread'
        ? esc(r.th.name) + ' <span class="tid">tid ' + r.th.tid + '</span>' : esc(r.label);
      html += '<div class="row-label ' + cls + (r.kind === 'thread' && r.th.folded ? ' folded' : '') +
        '" data-row="' + i + '"' + (r.kind === 'thread' ? ' data-tid="' + r.th.tid + '" title="' +
          esc(threadLabel(r.th)) + (r.th.main ? ', main thread' : '') +
          (r.th.exited ? ', exited' : '') + ' - click to fold"' : '') +
        ' style="top:' + r.y + 'px;height:' + r.h + 'px;line-height:' + r.h + 'px;width:' +
        LABEL_W + 'px">' + text + '</div>';
    });
    $('labels').innerHTML = html;
    $('labels').style.height = totalH + 'px';
  }
  function rowAtY(y) {
    var lo = 0, hi = rows.length - 1;
    if (!rows.length || y < 0 || y >= totalH) return -1;
    while (lo < hi) { var m = (lo + hi + 1) >> 1; if (rows[m].y <= y) lo = m; else hi = m - 1; }
    return lo;
  }
  // The requests row (lane) where request q is drawn.
  function reqRow(f, q) {
    var th = q.row >= 0 ? f.threads[q.row] : null;
    return th ? rows.find(function (x) { return x.kind === 'reqs' && x.th === th && x.lane === q.lane; }) || null : null;
  }
  function threadRow(th, depth) {
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      if (r.th === th && (depth === undefined ? r.kind === 'thread'
        : depth === 'reqs' ? r.kind === 'reqs' && !r.lane : r.kind === 'depth' && r.depth === depth)) return r;
    }
    return null;
  }

  // ---- view ---------------------------------------------------------------

  var view = { start: 0, end: pageEnd };
  var canvas = $('canvas'), ctx = canvas.getContext('2d');
  var axis = $('axis'), actx = axis.getContext('2d');
  var mini = $('minimap'), mctx = mini.getContext('2d');
  var tracks = $('tracks');
  var W = 0, H = 0, dpr = 1, sel = null, hoverX = -1, dirty = false;
  var search = { q: '', list: [], pos: -1, set: null, res: null, err: null, timer: null,
                 min: null, max: null, lo: 0, hi: Infinity, ms: 0 };

  function trackW() { return Math.max(10, W - LABEL_W); }
  function xOf(ns) { return LABEL_W + (ns - view.start) * trackW() / (view.end - view.start); }
  function nsAtX(x) { return view.start + (x - LABEL_W) * (view.end - view.start) / trackW(); }
  function setView(a, b) {
    var span = Math.max(MIN_SPAN_NS, b - a), total = pageEnd * 1.02 + MIN_SPAN_NS;
    if (span > total) span = total;
    if (a < -pageEnd * 0.01) a = -pageEnd * 0.01;
    if (a + span > pageEnd * 1.01 + MIN_SPAN_NS) a = pageEnd * 1.01 + MIN_SPAN_NS - span;
    view.start = a; view.end = a + span;
    redraw();
  }
  function zoomAt(x, factor) {
    var c = nsAtX(x), a = c - (c - view.start) * factor, b = c + (view.end - c) * factor;
    setView(a, b);
  }
  function pan(dxPx) {
    var d = dxPx * (view.end - view.start) / trackW();
    setView(view.start + d, view.end + d);
  }
  function fit() { setView(-pageEnd * 0.005, pageEnd * 1.005); }

  function resize() {
    dpr = window.devicePixelRatio || 1;
    W = tracks.clientWidth; H = tracks.clientHeight;
    [[canvas, H], [axis, 26], [mini, 34]].forEach(function (p) {
      p[0].width = Math.round(W * dpr); p[0].height = Math.round(p[1] * dpr);
      p[0].style.height = p[1] + 'px';
    });
    redraw();
  }
  function redraw() {
    if (dirty) return;
    dirty = true;
    requestAnimationFrame(function () { dirty = false; draw(); });
  }

  // ---- drawing ------------------------------------------------------------

  // Draws intervals [lo, hi) of begin/end (ticks of file f, sorted by begin,
  // not overlapping) in a row; color(k) (null: not in this row) and
  // label(k) describe item k.
  // Items narrower than a pixel merge into one block per pixel.
  function drawIntervals(f, begin, end, lo, hi, y, h, color, label, outline) {
    var ts = tickOf(f, view.start), te = tickOf(f, view.end);
    var a = lo, b = hi;
    while (a < b) { var m = (a + b) >>> 1; if (end[m] < ts) a = m + 1; else b = m; }
    var pxPerTick = f.k * trackW() / (view.end - view.start);
    var x0run = -1, x1run = -1, crun = null;
    function flush() {
      if (crun !== null) { ctx.fillStyle = crun; ctx.fillRect(x0run, y, x1run - x0run, h); }
      crun = null;
    }
    for (var k = a; k < hi; k++) {
      var bk = begin[k];
      if (bk > te) break;
      var col = color(k);
      if (col === null) continue;   // not drawn in this row
      var x0 = LABEL_W + (nsOf(f, bk) - view.start) * pxPerTick / f.k;
      var x1 = x0 + (end[k] - bk) * pxPerTick;
      if (x1 - x0 >= 1) {
        flush();
        var xa = Math.max(x0, LABEL_W), xb = Math.min(x1, W);
        ctx.fillStyle = col;
        ctx.fillRect(xa, y, xb - xa, h);
        if (outline) outline(k, xa, y, xb - xa, h);
        if (xb - xa > 24 && label) {
          var text = label(k, xb - xa - 6);
          if (text) { ctx.fillStyle = '#111'; ctx.fillText(text, xa + 3, y + h - 4); }
        }
        continue;
      }
      // Narrower than a pixel: one block for this pixel, then skip the
      // items that begin in this pixel, except the last one: items do not
      // overlap, so only that one can reach beyond the pixel (a long call
      // that begins in the same pixel as short ones), and it is drawn as
      // any other item.
      var px = Math.floor(x0), c = col;
      if (px < LABEL_W) px = LABEL_W;
      if (crun === c && px <= x1run) { x1run = px + 1; } else { flush(); crun = c; x0run = px; x1run = px + 1; }
      var next = tickOf(f, nsAtX(px + 1));
      if (k + 2 < hi && begin[k + 2] < next) {
        var lo2 = k + 1, hi2 = hi;
        while (lo2 < hi2) { var m2 = (lo2 + hi2) >>> 1; if (begin[m2] < next) lo2 = m2 + 1; else hi2 = m2; }
        k = lo2 - 2;   // the loop's k++ visits lo2 - 1, the last one in this pixel
      }
    }
    flush();
  }

  function fitText(f, fi, maxW) {
    var name = f.funcs[fi], w = f.textW[fi];
    if (w < 0) { w = ctx.measureText(name).width; f.textW[fi] = w; }
    if (w <= maxW) return name;
    var n = Math.floor(maxW / (w / name.length)) - 1;
    return n >= 2 ? name.slice(0, n) + '\u2026' : null;
  }

  function drawRow(r) {
    var f = r.file, y = r.y - tracks.scrollTop, h = r.h;
    if (r.kind === 'section') {
      ctx.fillStyle = '#e8ecf2'; ctx.fillRect(0, y, W, h);
      return;
    }
    if (r.kind === 'core') {
      var c = r.core;
      ctx.fillStyle = '#f7f8fa'; ctx.fillRect(LABEL_W, y, W, h);
      drawIntervals(f, c.begin, c.end, 0, c.n, y + 1, h - 2,
        function (k) { return hsl(f.threads[c.thread[k]].hue, 55, 62); },
        function (k, maxW) {
          var s = threadLabel(f.threads[c.thread[k]]);
          return s.length * 6 < maxW ? s : null;
        });
      // Context switches: another process or idle between the runs.
      if (c.exact) drawIntervals(f, c.idleB, c.idleE, 0, c.idleB.length, y + h / 2 - 1, 2,
        function () { return '#cbd5e1'; }, null);
      return;
    }
    var th = r.th;
    if (r.kind === 'thread') {
      ctx.fillStyle = '#eef1f6'; ctx.fillRect(0, y, W, h);
      // Off the cpu: blocked or preempted, the row's full height.
      if (th.offB.length) drawIntervals(f, th.offB, th.offE, 0, th.offB.length, y + 2, h - 4,
        function (k) { return th.offWhy[k] ? COL_PREEMPTED : COL_BLOCKED; },
        function (k, maxW) { var t = th.offWhy[k] ? 'preempted' : 'blocked'; return maxW > 60 ? t : null; });
      th.marks.forEach(function (m) {
        var x = xOf(nsOf(f, m.tick));
        if (x < LABEL_W - 4 || x > W + 4) return;
        ctx.fillStyle = sel && sel.kind === 'mark' && sel.m === m ? '#b91c1c' : '#7c3aed';
        ctx.beginPath(); ctx.moveTo(x, y + h - 2); ctx.lineTo(x - 4, y + 3); ctx.lineTo(x + 4, y + 3);
        ctx.fill();
      });
      return;
    }
    if (r.kind === 'reqs') {
      var ln = th.reqLanes[r.lane], q = ln.q;
      drawIntervals(f, ln.b, ln.e, 0, q.length, y + 1, h - 2,
        function (k) { return q[k].flags & 4 ? '#dc2626' : hsl(hashStr(nameOf(f, q[k].kind)) % 360, 35, 72); },
        function (k, maxW) {
          var s = nameOf(f, q[k].kind) + ' #' + q[k].id + (q[k].flags & 4 ? ' SLOW (trigger)' : '');
          return s.length * 6 < maxW ? s : null;
        },
        function (k, x, yy, w, hh) {
          if (q[k].flags & 4 || (sel && sel.kind === 'req' && sel.r === q[k])) {
            ctx.strokeStyle = '#7f1d1d'; ctx.lineWidth = 2; ctx.strokeRect(x + 1, yy + 1, w - 2, hh - 2);
          }
        });
      return;
    }
    // A depth row of the flame chart.
    var d = r.depth, lo = th.lane[d], hi = th.lane[d + 1], set = search.set;
    var dim = set !== null;
    drawIntervals(f, th.begin, th.end, lo, hi, y, h - 1,
      function (k) {
        var hue = f.funcColor[th.func[k]];
        if (dim) return set[f.index][th.func[k]] && inRange(f, th.end[k] - th.begin[k]) ? hsl(hue, 85, 50) : hsl(hue, 10, 88);
        return hsl(hue, 55, 68 - (d % 4) * 3);
      },
      function (k, maxW) { return fitText(f, th.func[k], maxW); },
      function (k, x, yy, w, hh) {
        if (th.flags[k] & 3) {   // cut by the window's edge: a dashed end
          ctx.strokeStyle = '#475569'; ctx.setLineDash([2, 2]); ctx.lineWidth = 1;
          if (th.flags[k] & 1) { ctx.beginPath(); ctx.moveTo(x + 0.5, yy); ctx.lineTo(x + 0.5, yy + hh); ctx.stroke(); }
          if (th.flags[k] & 2) { ctx.beginPath(); ctx.moveTo(x + w - 0.5, yy); ctx.lineTo(x + w - 0.5, yy + hh); ctx.stroke(); }
          ctx.setLineDash([]);
        }
        if (dim && set[f.index][th.func[k]] && inRange(f, th.end[k] - th.begin[k])) {
          ctx.strokeStyle = '#111'; ctx.lineWidth = 1; ctx.strokeRect(x + 0.5, yy + 0.5, w - 1, hh - 1);
        }
      });
    // The time these calls spent off the cpu: a band at the row's bottom
    // (intervals where the stack was shallower than this row are skipped).
    if (th.offB.length) drawIntervals(f, th.offB, th.offE, 0, th.offB.length, y + h - 5, 4,
      function (k) { return th.offDepth[k] < d ? null : th.offWhy[k] ? COL_PREEMPTED : COL_BLOCKED; }, null);
  }

  // The selected range (shift+drag): shaded, with its length (the ruler).
  function drawRange() {
    if (!range) return;
    var a = Math.min(range.a, range.b), b = Math.max(range.a, range.b);
    var x0 = Math.max(xOf(a), LABEL_W), x1 = Math.min(xOf(b), W);
    if (x1 < LABEL_W || x0 > W) return;
    ctx.fillStyle = 'rgba(37,99,235,0.10)'; ctx.fillRect(x0, 0, x1 - x0, H);
    ctx.fillStyle = '#1d4ed8'; ctx.fillRect(x0, 0, 1, H); ctx.fillRect(x1 - 1, 0, 1, H);
    var text = '\u0394 ' + fmtDur(b - a);
    ctx.font = FONT;
    var tw = ctx.measureText(text).width, mid = (x0 + x1) / 2;
    ctx.fillRect(x0, 8, x1 - x0, 1);
    ctx.fillStyle = 'rgba(29,78,216,0.92)'; ctx.fillRect(mid - tw / 2 - 4, 1, tw + 8, 15);
    ctx.fillStyle = '#fff'; ctx.fillText(text, mid - tw / 2, 12);
  }

  function drawSelection() {
    var s = sel;
    if (!s) return;
    var f = s.file, a, b, r = null;
    if (s.kind === 'call') { a = s.th.begin[s.k]; b = s.th.end[s.k]; r = threadRow(s.th, s.depth); }
    else if (s.kind === 'req') {
      a = s.r.begin; b = s.r.end;
      r = rows.find(function (x) { return x.kind === 'reqs' && x.th === f.threads[s.r.row] && x.lane === s.r.lane; });
    }
    else if (s.kind === 'run') { a = s.c.begin[s.k]; b = s.c.end[s.k]; r = rows.find(function (x) { return x.core === s.c; }); }
    else return;
    if (!r) return;
    var x0 = xOf(nsOf(f, a)), x1 = Math.max(xOf(nsOf(f, b)), x0 + 2), y = r.y - tracks.scrollTop;
    ctx.strokeStyle = '#1d4ed8'; ctx.lineWidth = 2;
    ctx.strokeRect(Math.max(x0, LABEL_W) - 1, y - 1, Math.min(x1, W + 2) - Math.max(x0, LABEL_W) + 2, r.h + 1);
  }

  function niceStep(ns) {
    var p = Math.pow(10, Math.floor(Math.log10(ns))), m = ns / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }
  function axisLabel(ns, step) {
    var w = origin + BigInt(Math.round(ns)), s = fmtWall(w, false);
    // Keep the digits the step needs: HH:MM:SS[.mmm[uuu[nnn]]].
    var keep = step >= 1e9 ? 8 : step >= 1e6 ? 12 : step >= 1e3 ? 15 : 18;
    return s.slice(0, keep);
  }

  function draw() {
    var t0 = performance.now();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.font = FONT;
    var top = tracks.scrollTop, i = Math.max(0, rowAtY(top));
    for (; i < rows.length && rows[i].y < top + H; i++) drawRow(rows[i]);
    // Label column background (labels are DOM elements above it).
    ctx.fillStyle = 'rgba(255,255,255,0.92)'; ctx.fillRect(0, 0, LABEL_W, H);
    ctx.fillStyle = '#d5dae3'; ctx.fillRect(LABEL_W - 1, 0, 1, H);
    // The trigger: a line across every row at the slow request's end.
    files.forEach(function (f) {
      if (!f.trigger) return;
      var x = xOf(nsOf(f, f.trigger.end));
      if (x >= LABEL_W && x <= W) { ctx.fillStyle = 'rgba(220,38,38,0.8)'; ctx.fillRect(x - 1, 0, 2, H); }
      if (f.trig) {
        var xb = xOf(nsOf(f, f.trig.begin));
        if (xb >= LABEL_W && xb <= W) { ctx.fillStyle = 'rgba(220,38,38,0.35)'; ctx.fillRect(xb, 0, 1, H); }
      }
    });
    drawSelection();
    drawRange();
    if (hoverX >= LABEL_W) { ctx.fillStyle = 'rgba(30,41,59,0.35)'; ctx.fillRect(hoverX, 0, 1, H); }
    drawAxis();
    drawMinimap();
    ktrace.lastFrameMs = performance.now() - t0;
    ktrace.frames++;
  }

  var axisDrawn = [];   // [x0, x1, text] of the labels the last frame drew
  function drawAxis() {
    actx.setTransform(dpr, 0, 0, dpr, 0, 0);
    actx.clearRect(0, 0, W, 26);
    actx.font = FONT; actx.fillStyle = '#334155';
    var span = view.end - view.start, step = niceStep(span / Math.max(1, trackW() / 150));
    actx.fillText('span ' + fmtDur(span), 6, 11);
    actx.fillText('UTC', 6, 23);
    // Ticks at round wall-clock times: origin + t a multiple of step.
    var rem = Number(origin % BigInt(Math.max(1, Math.round(step))));
    // A label is left out where it would run into the previous one (deep
    // zoom: long labels, ticks close together); its tick stays.
    var lastEnd = -Infinity;
    axisDrawn = [];
    for (var t = Math.ceil((view.start + rem) / step) * step - rem; t <= view.end; t += step) {
      var x = xOf(t);
      if (x < LABEL_W) continue;
      actx.fillStyle = '#94a3b8'; actx.fillRect(x, 14, 1, 12);
      var label = axisLabel(t, step), lw = actx.measureText(label).width;
      if (x + 3 < lastEnd + 10 || x + 3 + lw > W) continue;
      actx.fillStyle = '#334155'; actx.fillText(label, x + 3, 12);
      lastEnd = x + 3 + lw;
      axisDrawn.push([x + 3, lastEnd, label]);
    }
    files.forEach(function (f) {
      if (!f.trigger) return;
      var x = xOf(nsOf(f, f.trigger.end));
      if (x < LABEL_W || x > W) return;
      actx.fillStyle = '#dc2626';
      actx.beginPath(); actx.moveTo(x, 26); actx.lineTo(x - 5, 16); actx.lineTo(x + 5, 16); actx.fill();
      actx.fillText('TRIGGER', x + 6, 24);
    });
  }

  // The minimap: calls beginning per pixel over the whole window, the
  // trigger, and the part in view.
  var density = null;
  function buildDensity() {
    var n = 1024; density = new Float64Array(n);
    files.forEach(function (f) {
      f.threads.forEach(function (th) {
        for (var k = 0; k < th.n; k++) {
          var b = Math.floor(nsOf(f, th.begin[k]) / pageEnd * n);
          density[b < 0 ? 0 : b >= n ? n - 1 : b]++;
        }
      });
    });
  }
  function drawMinimap() {
    mctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    mctx.clearRect(0, 0, W, 34);
    mctx.fillStyle = '#f3f5f9'; mctx.fillRect(0, 0, W, 34);
    var tw = trackW(), n = density.length, max = 0, i;
    for (i = 0; i < n; i++) max = Math.max(max, density[i]);
    mctx.fillStyle = '#64748b';
    for (i = 0; i < n; i++) {
      if (!density[i]) continue;
      var hh = Math.max(1, 28 * Math.log1p(density[i]) / Math.log1p(max));
      mctx.fillRect(LABEL_W + i * tw / n, 32 - hh, Math.max(1, tw / n), hh);
    }
    // Where the search's matches are: a band along the bottom.
    if (search.res && search.res.count) {
      var hm = 0, hb = search.res.hits;
      for (i = 0; i < hb.length; i++) hm = Math.max(hm, hb[i]);
      mctx.fillStyle = '#f59e0b';
      for (i = 0; i < hb.length; i++) {
        if (!hb[i]) continue;
        var hh2 = Math.max(2, 12 * Math.log1p(hb[i]) / Math.log1p(hm));
        mctx.fillRect(LABEL_W + i * tw / hb.length, 34 - hh2, Math.max(1, tw / hb.length), hh2);
      }
    }
    mctx.fillStyle = '#334155'; mctx.font = FONT;
    mctx.fillText(search.res && search.res.count ? 'whole window: matches' : 'whole window', 6, 20);
    files.forEach(function (f) {
      if (!f.trigger) return;
      mctx.fillStyle = '#dc2626';
      mctx.fillRect(LABEL_W + nsOf(f, f.trigger.end) / pageEnd * tw - 1, 0, 3, 34);
    });
    var a = LABEL_W + view.start / pageEnd * tw, b = LABEL_W + view.end / pageEnd * tw;
    mctx.fillStyle = 'rgba(37,99,235,0.18)'; mctx.fillRect(a, 0, Math.max(2, b - a), 34);
    mctx.strokeStyle = '#1d4ed8'; mctx.lineWidth = 1; mctx.strokeRect(a + 0.5, 0.5, Math.max(2, b - a) - 1, 33);
  }

  // ---- picking and details -------------------------------------------------

  function lowerEnd(end, lo, hi, t) {
    while (lo < hi) { var m = (lo + hi) >>> 1; if (end[m] < t) lo = m + 1; else hi = m; }
    return lo;
  }
  // What is under the canvas point (x, y)?  Within 3 px of a narrow item.
  function pick(x, y) {
    var ri = rowAtY(y + tracks.scrollTop);
    if (ri < 0 || x < LABEL_W) return null;
    var r = rows[ri], f = r.file, t = tickOf(f, nsAtX(x)), slack = 3 * (view.end - view.start) / trackW() / f.k;
    function near(begin, end, lo, hi) {
      var k = lowerEnd(end, lo, hi, t - slack), best = -1, bd = Infinity;
      for (; k < hi && begin[k] <= t + slack; k++) {
        var dd = t < begin[k] ? begin[k] - t : t > end[k] ? t - end[k] : 0;
        if (dd < bd) { bd = dd; best = k; }
      }
      return best;
    }
    if (r.kind === 'depth') {
      var th = r.th, lo = th.lane[r.depth], hi = th.lane[r.depth + 1], k = near(th.begin, th.end, lo, hi);
      if (k < 0) return null;
      var hit = { kind: 'call', file: f, th: th, k: k, depth: r.depth };
      // A call narrower than a pixel was drawn in its pixel's one block
      // with every other such call beginning in that pixel: say so.
      var tpp = (view.end - view.start) / trackW() / f.k;
      if (th.end[k] - th.begin[k] < tpp) {
        var px = Math.floor(xOf(nsOf(f, th.begin[k]))), pa = tickOf(f, nsAtX(px)), pb = tickOf(f, nsAtX(px + 1));
        var j = lowerEnd(th.begin, lo, hi, pa), n = 0, tot = 0;
        for (; j < hi && th.begin[j] < pb; j++)
          if (th.end[j] - th.begin[j] < tpp) { n++; tot += th.end[j] - th.begin[j]; }
        if (n > 1) hit.merged = { n: n, ticks: tot };
      }
      return hit;
    }
    if (r.kind === 'core') {
      var c = r.core, kc = near(c.begin, c.end, 0, c.n);
      if (kc >= 0 && (!c.exact || (c.begin[kc] <= t && t <= c.end[kc]))) return { kind: 'run', file: f, c: c, k: kc };
      if (c.exact) {
        var ki = near(c.idleB, c.idleE, 0, c.idleB.length);
        if (ki >= 0) return { kind: 'idle', file: f, c: c, k: ki };
      }
      return kc < 0 ? null : { kind: 'run', file: f, c: c, k: kc };
    }
    if (r.kind === 'reqs') {
      var q = r.th.reqLanes[r.lane].q, best = null, bd = Infinity;
      q.forEach(function (x) {
        var dd = t < x.begin ? x.begin - t : t > x.end ? t - x.end : 0;
        if (dd <= slack && dd < bd) { bd = dd; best = x; }
      });
      return best && { kind: 'req', file: f, r: best };
    }
    if (r.kind === 'thread') {
      var m = null, md = Infinity;
      r.th.marks.forEach(function (x) { var dd = Math.abs(x.tick - t); if (dd <= slack * 2 && dd < md) { md = dd; m = x; } });
      if (m) return { kind: 'mark', file: f, m: m };
      var ko = near(r.th.offB, r.th.offE, 0, r.th.offB.length);
      return ko < 0 ? null : { kind: 'off', file: f, th: r.th, k: ko };
    }
    return null;
  }

  function cpuName(f, core) { return f.cores[core] ? 'cpu ' + f.cores[core].cpu : '?'; }
  function requestAt(th, tick) {
    var best = null;
    th.reqs.forEach(function (q) { if (q.begin <= tick && tick <= q.end && (!best || q.begin > best.begin)) best = q; });
    return best;
  }
  function table(pairs) {
    return '<table><tr>' + pairs.map(function (p) { return '<td class="k">' + p[0] + '</td>'; }).join('') +
      '</tr><tr>' + pairs.map(function (p) { return '<td class="v">' + p[1] + '</td>'; }).join('') + '</tr></table>';
  }
  function reqText(f, q) {
    return esc(nameOf(f, q.kind)) + ' #' + esc(q.id) + (q.flags & 4 ? ' (the slow request: trigger)' : '');
  }
  function showDetails() {
    var s = sel, el = $('details'), f = s && s.file, c;
    if (!s) { el.innerHTML = '<span class="hint">Click a call, request, mark or core run to see its details.</span>'; return; }
    c = f.clock;
    if (s.kind === 'call') {
      var th = s.th, k = s.k, d = s.depth, b = th.begin[k], e = th.end[k];
      // Self time: minus the direct callees (the next lane, inside [b, e]).
      var child = 0;
      if (d + 1 <= th.maxdepth) {
        var lo = th.lane[d + 1], hi = th.lane[d + 2], j = lo, jh = hi;
        while (j < jh) { var m = (j + jh) >>> 1; if (th.begin[m] < b) j = m + 1; else jh = m; }
        for (; j < hi && th.begin[j] <= e; j++)
          if (th.end[j] <= e) child += th.end[j] - th.begin[j];
      }
      var fl = th.flags[k], notes = [];
      if (fl & 1) notes.push('entered before the window');
      if (fl & 2) notes.push(fl & 8 ? 'exit lost' : 'still running at window end');
      if (fl & 4) notes.push('span');
      var q = requestAt(th, b);
      el.innerHTML = '<div><span class="name">' + esc(f.funcs[th.func[k]]) + '</span>' +
        (notes.length ? ' <span class="warn">[' + notes.join(', ') + ']</span>' : '') + '</div>' +
        table([['start (UTC)', '<span class="mono">' + fmtWall(c.wall(b), false) + '</span>'],
               ['duration', '<span id="detail-duration">' + fmtDur(c.durNs(e - b)) + '</span>'],
               ['self', fmtDur(c.durNs(e - b - child))]].concat(splitCells(f, th, b, e), [
               ['depth', d],
               ['thread', esc(threadLabel(th))],
               ['core', cpuName(f, th.core[k])],
               ['request', q ? reqText(f, q) : '&ndash;']]));
    } else if (s.kind === 'req') {
      var r = s.r, rt = f.threads[r.row];
      el.innerHTML = '<div><span class="name">request ' + reqText(f, r) + '</span></div>' +
        table([['start (UTC)', '<span class="mono">' + fmtWall(c.wall(r.begin), false) + '</span>'],
               ['duration', '<span id="detail-duration">' + fmtDur(c.durNs(r.end - r.begin)) + '</span>'],
               ['thread', rt ? esc(threadLabel(rt)) : '?']].concat(
               r.endRow !== r.row && r.endRow >= 0 ? [['ended by', '<span id="detail-ended-by">' + esc(threadLabel(f.threads[r.endRow])) + '</span> (handed over)']] : [],
               rt ? splitCells(f, rt, r.begin, r.end) : [], [
               ['core', cpuName(f, r.core)],
               ['cut', (r.flags & 1 ? 'began before the window ' : '') + (r.flags & 2 ? 'still open at window end' : '') || 'no']]));
    } else if (s.kind === 'run') {
      var rth = f.threads[s.c.thread[s.k]];
      el.innerHTML = '<div><span class="name">cpu ' + s.c.cpu + ' ran ' + esc(threadLabel(rth)) + '</span>' +
        (s.c.exact ? ' (from the context switches)' : ' (a run of its records: the first to the last)') + '</div>' +
        table([[s.c.exact ? 'switched in (UTC)' : 'first record (UTC)', '<span class="mono">' + fmtWall(c.wall(s.c.begin[s.k]), false) + '</span>'],
               [s.c.exact ? 'on the cpu' : 'to the last', '<span id="detail-duration">' + fmtDur(c.durNs(s.c.end[s.k] - s.c.begin[s.k])) + '</span>']]);
    } else if (s.kind === 'idle') {
      el.innerHTML = '<div><span class="name">cpu ' + s.c.cpu + ': another process or idle</span> (none of this process\'s threads ran)</div>' +
        table([['from (UTC)', '<span class="mono">' + fmtWall(c.wall(s.c.idleB[s.k]), false) + '</span>'],
               ['duration', '<span id="detail-duration">' + fmtDur(c.durNs(s.c.idleE[s.k] - s.c.idleB[s.k])) + '</span>']]);
    } else if (s.kind === 'off') {
      var oth = s.th, ob = oth.offB[s.k], oe = oth.offE[s.k];
      el.innerHTML = '<div><span class="name">' + esc(threadLabel(oth)) + ' off the cpu: ' +
        (oth.offWhy[s.k] ? 'preempted' : 'blocked') + '</span> ' +
        (oth.offWhy[s.k] ? '(still runnable: another thread had the cpu)' : '(waiting: a lock, sleep, I/O)') + '</div>' +
        table([['from (UTC)', '<span class="mono">' + fmtWall(c.wall(ob), false) + '</span>'],
               ['duration', '<span id="detail-duration">' + fmtDur(c.durNs(oe - ob)) + '</span>'],
               ['in', callAt(oth, (ob + oe) / 2)]].concat(meanwhile(f, oth, ob, oe)));
    } else if (s.kind === 'mark') {
      var mt = f.threads[s.m.row];
      el.innerHTML = '<div><span class="name">mark ' + esc(nameOf(f, s.m.name)) + ' = ' + esc(s.m.value) + '</span></div>' +
        table([['time (UTC)', '<span class="mono">' + fmtWall(c.wall(s.m.tick), false) + '</span>'],
               ['thread', esc(threadLabel(mt))], ['core', cpuName(f, s.m.core)]]);
    }
  }
  function select(s) { sel = s; showDetails(); redraw(); }
  // On-CPU / blocked / preempted cells for [b, e) of thread th.
  function splitCells(f, th, b, e) {
    if (!f.sched) return [];
    var o = offIn(th, b, e), c = f.clock;
    return [['on-CPU', '<span id="detail-oncpu">' + fmtDur(c.durNs(e - b - o[0] - o[1])) + '</span>'],
            ['<span class="legend" style="background:' + COL_BLOCKED + '"></span>blocked', '<span id="detail-blocked">' + fmtDur(c.durNs(o[0])) + '</span>'],
            ['<span class="legend" style="background:' + COL_PREEMPTED + '"></span>preempted', '<span id="detail-preempted">' + fmtDur(c.durNs(o[1])) + '</span>']];
  }
  // While th was off the cpu in [b, e): what each other thread of the file
  // was in (its innermost call in the middle) and its on-CPU time there,
  // the busiest first: who ran while th waited.
  function meanwhile(f, th, b, e) {
    var out = [];
    f.threads.forEach(function (o) {
      if (o === th) return;
      var off = offIn(o, b, e), on = e - b - off[0] - off[1];
      out.push({ th: o, on: on, text: callAt(o, (b + e) / 2) });
    });
    out.sort(function (x, y) { return y.on - x.on; });
    return out.slice(0, 4).map(function (x) {
      return [esc(threadLabel(x.th)), x.text + ' <span class="k">(' + fmtDur(f.clock.durNs(x.on)) + ' on-CPU)</span>'];
    });
  }
  // The innermost call of th open at tick t, as text.
  function callAt(th, t) {
    for (var d = th.maxdepth; d >= 0 && th.n; d--) {
      var lo = th.lane[d], hi = th.lane[d + 1], a = lowerEnd(th.end, lo, hi, t);
      if (a < hi && th.begin[a] <= t) return esc(th.file.funcs[th.func[a]]);
    }
    return '&ndash;';
  }

  // A one-line summary of what is under the pointer.
  function tipText(s) {
    var f = s.file, c = f.clock;
    if (s.kind === 'call')
      return (s.merged ? s.merged.n + ' calls merged in this pixel, ' + fmtDur(c.durNs(s.merged.ticks)) +
              ' in all; nearest: ' : '') +
        f.funcs[s.th.func[s.k]] + '  ' + fmtDur(c.durNs(s.th.end[s.k] - s.th.begin[s.k]));
    if (s.kind === 'req')
      return 'request ' + nameOf(f, s.r.kind) + ' #' + s.r.id + '  ' + fmtDur(c.durNs(s.r.end - s.r.begin)) +
        (s.r.flags & 4 ? '  (the slow request)' : '');
    if (s.kind === 'run') return threadLabel(f.threads[s.c.thread[s.k]]) + ' on cpu ' + s.c.cpu +
      (s.c.exact ? '  ' + fmtDur(c.durNs(s.c.end[s.k] - s.c.begin[s.k])) : '');
    if (s.kind === 'idle') return 'cpu ' + s.c.cpu + ': another process or idle  ' + fmtDur(c.durNs(s.c.idleE[s.k] - s.c.idleB[s.k]));
    if (s.kind === 'off') return threadLabel(s.th) + ' off the cpu, ' + (s.th.offWhy[s.k] ? 'preempted' : 'blocked') +
      '  ' + fmtDur(c.durNs(s.th.offE[s.k] - s.th.offB[s.k]));
    return 'mark ' + nameOf(f, s.m.name) + ' = ' + s.m.value;
  }
  function showTip(e) {
    var tip = $('tip'), rect = canvas.getBoundingClientRect();
    var s = e && !drag ? pick(e.clientX - rect.left, e.clientY - rect.top) : null;
    if (!s) { tip.hidden = true; return; }
    tip.textContent = tipText(s);
    tip.hidden = false;
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - tip.offsetWidth - 4) + 'px';
    tip.style.top = (e.clientY + 16) + 'px';
  }

  // Bring [a, b] (page ns) into view, zooming in or out as needed, and the
  // row r into the vertical view.
  function reveal(a, b, r, zoom) {
    var span = view.end - view.start, w = Math.max(b - a, MIN_SPAN_NS);
    if (zoom || w > span * 0.9 || w < span / trackW() * 4) span = w / 0.6;
    setView((a + b) / 2 - span / 2, (a + b) / 2 + span / 2);
    if (r && (r.y < tracks.scrollTop || r.y + r.h > tracks.scrollTop + H))
      tracks.scrollTop = Math.max(0, r.y - H / 3);
    redraw();
  }

  // ---- search ---------------------------------------------------------------

  // "10us", "1.5 ms", "200ns", "2s"; a bare number is us.  ns, or null.
  function parseDur(t) {
    var m = /^\s*([0-9]*\.?[0-9]+)\s*(ns|us|\u00b5s|ms|s)?\s*$/.exec(t || '');
    if (!m) return null;
    return parseFloat(m[1]) * { ns: 1, us: 1e3, '\u00b5s': 1e3, ms: 1e6, s: 1e9 }[m[2] || 'us'];
  }
  // The names a query matches: /regex/ (case-insensitive), an exact
  // function name (that function alone), or a substring (any case).
  function matcher(q) {
    var re = /^\/(.+)\/$/.exec(q);
    if (re) { var rx = new RegExp(re[1], 'i'); return function (name) { return rx.test(name); }; }
    var exact = files.some(function (f) { return f.funcs.indexOf(q) >= 0; }), lq = q.toLowerCase();
    return exact ? function (name) { return name === q; } : function (name) { return name.toLowerCase().indexOf(lq) >= 0; };
  }

  // Every call of the matching functions within [min, max] duration: count,
  // total (a call inside another match of its thread counted once, as
  // `stats` counts recursion), min, max, and the SEARCH_TOP longest (a
  // heap while scanning, so a query costs one pass over the typed arrays,
  // whatever it matches).
  var SEARCH_TOP = 500;
  function runSearch(q) {
    var t0 = performance.now();
    clearTimeout(search.timer); search.timer = null;
    var minNs = parseDur($('min-dur').value), maxNs = parseDur($('max-dur').value);
    search.q = q; search.list = []; search.pos = -1; search.set = null; search.err = null; search.res = null;
    search.min = minNs; search.max = maxNs;
    if (q || minNs !== null || maxNs !== null) {
      var match;
      try { match = q ? matcher(q) : function () { return true; }; } catch (e) { search.err = 'bad regex: ' + e.message; }
      if (match) {
        search.set = files.map(function (f) {
          var set = new Uint8Array(f.funcs.length);
          f.funcs.forEach(function (name, i) { set[i] = match(name) ? 1 : 0; });
          return set;
        });
        search.res = scan(minNs === null ? 0 : minNs, maxNs === null ? Infinity : maxNs);
        search.list = search.res.top;
      }
    }
    search.ms = performance.now() - t0;
    showCount();
    if (search.q || search.res) showResults(); else if (panel === 'search') closeSide();
    redraw();
  }
  function inRange(f, ticks) {
    var ns = ticks * f.k;
    return ns >= search.lo && ns <= search.hi;
  }
  function scan(lo, hi) {
    var n = 0, totalNs = 0, minNs = Infinity, maxNs = -1;
    var hd = new Float64Array(SEARCH_TOP), hr = [], hn = 0;   // min-heap by duration
    var NB = 1024, hits = new Float64Array(NB);              // matches per minimap bin
    search.lo = lo; search.hi = hi;
    function push(dur, ref) {
      var i;
      if (hn < SEARCH_TOP) { i = hn++; }
      else if (dur <= hd[0]) return;
      else {   // replace the root, sift down
        i = 0;
        for (;;) {
          var l = 2 * i + 1, r = l + 1, m = i, md = dur;
          if (l < hn && hd[l] < md) { m = l; md = hd[l]; }
          if (r < hn && hd[r] < md) { m = r; }
          if (m === i) break;
          hd[i] = hd[m]; hr[i] = hr[m]; i = m;
        }
        hd[i] = dur; hr[i] = ref;
        return;
      }
      while (i > 0) {   // sift up
        var p = (i - 1) >> 1;
        if (hd[p] <= dur) break;
        hd[i] = hd[p]; hr[i] = hr[p]; i = p;
      }
      hd[i] = dur; hr[i] = ref;
    }
    files.forEach(function (f) {
      var set = search.set[f.index], k = f.k, loT = lo / k, hiT = hi / k, ftot = 0;
      var binK = NB * k / pageEnd, binOff = NB * f.off / pageEnd;
      var fmin = Infinity, fmax = -1;
      f.threads.forEach(function (th) {
        var B = th.begin, E = th.end, F = th.func;
        // Counted matches of shallower depths, sorted and disjoint.
        var cb = [], ce = [];
        for (var d = 0; d <= th.maxdepth && th.n; d++) {
          var nb = [], ne = [], p = 0;
          for (var j = th.lane[d], hj = th.lane[d + 1]; j < hj; j++) {
            if (!set[F[j]]) continue;
            var b = B[j], e = E[j], dur = e - b;
            if (dur < loT || dur > hiT) continue;
            n++;
            var bin = Math.floor(binOff + b * binK);
            hits[bin < 0 ? 0 : bin >= NB ? NB - 1 : bin]++;
            if (dur < fmin) fmin = dur;
            if (dur > fmax) fmax = dur;
            if (hn < SEARCH_TOP || dur * k > hd[0]) push(dur * k, { f: f, th: th, k: j, d: d });
            while (p < cb.length && ce[p] < b) p++;
            if (p < cb.length && cb[p] <= b && e <= ce[p]) continue;   // inside a match
            ftot += dur; nb.push(b); ne.push(e);
          }
          if (nb.length) {   // merge the new ones in
            if (!cb.length) { cb = nb; ce = ne; }
            else {
              var mb = [], me = [], x = 0, y = 0;
              while (x < cb.length || y < nb.length) {
                if (y >= nb.length || (x < cb.length && cb[x] <= nb[y])) { mb.push(cb[x]); me.push(ce[x]); x++; }
                else { mb.push(nb[y]); me.push(ne[y]); y++; }
              }
              cb = mb; ce = me;
            }
          }
        }
      });
      totalNs += f.clock.durNs(ftot);
      if (fmax >= 0) {
        minNs = Math.min(minNs, f.clock.durNs(fmin));
        maxNs = Math.max(maxNs, f.clock.durNs(fmax));
      }
    });
    var top = [];
    for (var i = 0; i < hn; i++) {   // exact ns, as the decoder converts
      var x = hr[i]; x.dur = x.f.clock.durNs(x.th.end[x.k] - x.th.begin[x.k]); top.push(x);
    }
    top.sort(function (a, b) { return b.dur - a.dur || nsOf(a.f, a.th.begin[a.k]) - nsOf(b.f, b.th.begin[b.k]); });
    return { count: n, totalNs: totalNs, minNs: n ? minNs : 0, maxNs: n ? maxNs : 0, top: top, hits: hits };
  }
  function showCount() {
    var el = $('search-count'), r = search.res, n = r ? r.count : 0;
    el.className = (search.q || r) && !n ? 'none' : '';
    el.textContent = search.err ? search.err : !r ? '' : !n ? 'no calls' :
      (search.pos >= 0 ? (search.pos + 1) + ' of ' + n : n + ' calls');
  }
  function searchSummary(r) {
    return r.count.toLocaleString('en-US') + ' calls &middot; total <b id="search-total">' + fmtDur(r.totalNs) +
      '</b> &middot; min <b id="search-min">' + fmtDur(r.minNs) + '</b> &middot; max <b id="search-max">' +
      fmtDur(r.maxNs) + '</b>';
  }
  function showResults() {
    var r = search.res;
    var h = '<div class="sum" id="search-sum">' + (r ? searchSummary(r) : esc(search.err || '')) + '</div>';
    if (r && r.count) {
      h += '<div class="k">' + (r.top.length < r.count ? 'the ' + r.top.length + ' longest, ' : '') +
        'by duration (click: go there; Enter / n: the next)</div><table><tr><th class="num">duration</th><th>function</th><th>thread</th><th>start (UTC)</th></tr>';
      r.top.forEach(function (m, i) {
        h += '<tr class="item' + (i === search.pos ? ' cur' : '') + '" data-i="' + i + '"><td class="num">' + fmtDur(m.dur) + '</td><td>' +
          esc(m.f.funcs[m.th.func[m.k]]) + '</td><td>' + esc(threadLabel(m.th)) + '</td><td class="mono">' +
          fmtWall(m.f.clock.wall(m.th.begin[m.k]), false).slice(0, 15) + '</td></tr>';
      });
      h += '</table>';
    }
    openSide('search', 'Search ' + (search.q ? '"' + search.q + '"' : 'all functions') +
      (search.min !== null ? ' \u2265 ' + fmtDur(search.min) : '') + (search.max !== null ? ' \u2264 ' + fmtDur(search.max) : ''), h);
  }
  function scheduleSearch() {
    clearTimeout(search.timer);
    search.timer = setTimeout(function () { runSearch($('search').value.trim()); }, 150);
  }
  function step(dir) {
    if (search.timer) runSearch($('search').value.trim());
    var n = search.list.length;
    if (!n) return;
    search.pos = search.pos < 0 ? (dir > 0 ? 0 : n - 1) : (search.pos + dir + n) % n;
    goMatch(search.list[search.pos]);
    showCount();
    var rows = document.querySelectorAll('#side tr.item');
    rows.forEach(function (e) { e.classList.toggle('cur', +e.dataset.i === search.pos); });
    if (rows[search.pos]) rows[search.pos].scrollIntoView({ block: 'nearest' });
  }
  function goMatch(m) {
    select({ kind: 'call', file: m.f, th: m.th, k: m.k, depth: m.d });
    if (m.th.folded) { m.th.folded = false; layout(); }
    reveal(nsOf(m.f, m.th.begin[m.k]), nsOf(m.f, m.th.end[m.k]), threadRow(m.th, m.d), false);
  }
  // Calls of the function named name in time order (links, tests).
  function callsOf(name) {
    var all = [];
    files.forEach(function (f) {
      var fi = f.funcs.indexOf(name);
      if (fi < 0) return;
      f.threads.forEach(function (th) {
        for (var d = 0; d <= th.maxdepth && th.n; d++)
          for (var k = th.lane[d]; k < th.lane[d + 1]; k++)
            if (th.func[k] === fi) all.push({ f: f, th: th, k: k, d: d });
      });
    });
    all.sort(function (a, b) { return nsOf(a.f, a.th.begin[a.k]) - nsOf(b.f, b.th.begin[b.k]); });
    return all;
  }

  // ---- the side panel: search results, requests, a selected range ----------

  var panel = null, range = null;

  // ---- a selected range: per function and per thread inside it ---------------

  // Per function: calls overlapping [a, b] (page ns), their time inside it
  // (inclusive), and self time inside it (minus the callees' time inside
  // it); per thread: on-CPU, blocked, preempted inside it.
  function rangeStats(a, b) {
    var funcs = {}, threads = [];
    files.forEach(function (f) {
      var ta = tickOf(f, a), tb = tickOf(f, b), c = f.clock;
      var incl = new Float64Array(f.funcs.length), self = new Float64Array(f.funcs.length), n = new Float64Array(f.funcs.length);
      f.threads.forEach(function (th) {
        for (var d = 0; d <= th.maxdepth && th.n; d++) {
          var lo = th.lane[d], hi = th.lane[d + 1], k = lowerEnd(th.end, lo, hi, ta);
          for (; k < hi && th.begin[k] <= tb; k++) {
            var ov = Math.min(tb, th.end[k]) - Math.max(ta, th.begin[k]);
            if (ov < 0) continue;
            var fn = th.func[k];
            n[fn]++; incl[fn] += ov; self[fn] += ov;
            if (d > 0) {   // the caller loses it from its self time
              var plo = th.lane[d - 1], phi = th.lane[d], pk = lowerEnd(th.end, plo, phi, th.begin[k]);
              if (pk < phi && th.begin[pk] <= th.begin[k]) self[th.func[pk]] -= ov;
            }
          }
        }
        if (f.sched) {
          var o = offIn(th, Math.max(ta, 0), Math.min(tb, f.span));
          var wall = Math.max(0, Math.min(tb, f.span) - Math.max(ta, 0));
          threads.push({ name: threadLabel(th), onNs: c.durNs(wall - o[0] - o[1]), blockedNs: c.durNs(o[0]), preemptedNs: c.durNs(o[1]) });
        }
      });
      f.funcs.forEach(function (name, i) {
        if (!n[i]) return;
        var x = funcs[name] || (funcs[name] = { name: name, calls: 0, totalNs: 0, selfNs: 0 });
        x.calls += n[i]; x.totalNs += c.durNs(Math.round(incl[i])); x.selfNs += c.durNs(Math.round(Math.max(0, self[i])));
      });
    });
    var list = Object.keys(funcs).map(function (k) { return funcs[k]; });
    list.sort(function (x, y) { return y.selfNs - x.selfNs || y.totalNs - x.totalNs; });
    return { startNs: a, endNs: b, funcs: list, threads: threads };
  }
  function selectRange(a, b) {
    if (b < a) { var t = a; a = b; b = t; }
    range = { a: a, b: b };
    var st = rangeStats(a, b);
    var h = '<div class="sum">' + fmtWall(origin + BigInt(Math.round(a)), false) + ' .. ' +
      fmtWall(origin + BigInt(Math.round(b)), false) + ' UTC: <b id="range-length">' + fmtDur(b - a) + '</b></div>';
    if (st.threads.length) {
      h += '<h4>threads</h4><table><tr><th>thread</th><th class="num">on-CPU</th><th class="num">blocked</th><th class="num">preempted</th></tr>';
      st.threads.forEach(function (x) {
        h += '<tr><td>' + esc(x.name) + '</td><td class="num">' + fmtDur(x.onNs) + '</td><td class="num">' +
          fmtDur(x.blockedNs) + '</td><td class="num">' + fmtDur(x.preemptedNs) + '</td></tr>';
      });
      h += '</table>';
    }
    h += '<h4>functions (time inside the range; click: search)</h4><table><tr><th>function</th><th class="num">calls</th><th class="num">self</th><th class="num">total</th></tr>';
    st.funcs.slice(0, 300).forEach(function (x) {
      h += '<tr class="item" data-func="' + esc(x.name) + '"><td>' + esc(x.name) + '</td><td class="num">' + x.calls +
        '</td><td class="num">' + fmtDur(x.selfNs) + '</td><td class="num">' + fmtDur(x.totalNs) + '</td></tr>';
    });
    h += '</table>' + (st.funcs.length > 300 ? '<div class="k">' + (st.funcs.length - 300) + ' more functions</div>' : '');
    openSide('range', 'Selected range \u0394 ' + fmtDur(b - a), h);
    redraw();
    return st;
  }

  // ---- requests ------------------------------------------------------------------

  var reqSortKey = 'dur', reqDesc = true, REQ_ROWS = 1000;   // rows listed (sort to see others)
  function reqNs(f, q) { return f.clock.durNs(q.end - q.begin); }
  // Per file and kind: the requests, sorted by duration, with the
  // threshold that marks the slow ones (the trigger's for its kind, else
  // the kind's p99 when it has 100 requests or more).
  function requestGroups() {
    var groups = [];
    files.forEach(function (f) {
      var by = {};
      f.reqs.forEach(function (q) {
        if (q.row < 0) return;   // a thread --thread left out
        var g = by[q.kind] || (by[q.kind] = { f: f, kind: q.kind, name: nameOf(f, q.kind), list: [] });
        g.list.push({ f: f, q: q, ns: reqNs(f, q) });
      });
      Object.keys(by).forEach(function (k) {
        var g = by[k], ns = g.list.map(function (x) { return x.ns; }).sort(function (x, y) { return x - y; });
        var rank = function (p) { return ns[Math.max(0, Math.ceil(p * ns.length) - 1)]; };
        g.n = ns.length; g.p50 = rank(0.5); g.p99 = rank(0.99); g.max = ns[ns.length - 1]; g.min = ns[0];
        g.threshold = f.trigger && f.trigger.kind === g.name ? f.trigger.threshold_ns : ns.length >= 100 ? g.p99 : Infinity;
        g.list.forEach(function (x) { x.slow = !!(x.q.flags & 4) || x.ns > g.threshold; });
        groups.push(g);
      });
    });
    return groups;
  }
  function toggleRequests() { if (panel === 'requests') closeSide(); else showRequests(); }
  function reqSort(key) {
    if (key === reqSortKey) reqDesc = !reqDesc; else { reqSortKey = key; reqDesc = key === 'dur'; }
    showRequests();
  }
  function showRequests() {
    var groups = requestGroups(), all = [], h = '';
    if (!groups.length) h = '<div class="k">No requests in the window (ktrace_request_begin/end).</div>';
    groups.forEach(function (g, gi) {
      h += '<h4>' + esc(g.name) + ' &middot; ' + g.n + ' requests &middot; p50 ' + fmtDur(g.p50) + ' &middot; p99 ' +
        fmtDur(g.p99) + ' &middot; max ' + fmtDur(g.max) +
        (g.threshold < Infinity ? ' &middot; <span style="color:#b91c1c">slow &gt; ' + fmtDur(g.threshold) + '</span>' : '') +
        (files.length > 1 ? ' (' + esc(g.f.file) + ')' : '') + '</h4><canvas class="hist" data-g="' + gi + '"></canvas>';
      all = all.concat(g.list);
    });
    var key = reqSortKey, sgn = reqDesc ? -1 : 1;
    all.sort(function (x, y) {
      var d = key === 'dur' ? x.ns - y.ns : key === 'kind' ? (nameOf(x.f, x.q.kind) < nameOf(y.f, y.q.kind) ? -1 : nameOf(x.f, x.q.kind) > nameOf(y.f, y.q.kind) ? 1 : 0)
        : nsOf(x.f, x.q.begin) - nsOf(y.f, y.q.begin);
      return sgn * d || nsOf(x.f, x.q.begin) - nsOf(y.f, y.q.begin);
    });
    var arrow = function (k) { return k === reqSortKey ? (reqDesc ? ' \u25be' : ' \u25b4') : ''; };
    if (all.length) {
      h += '<table id="req-table"><tr><th data-sort="kind">request' + arrow('kind') + '</th><th class="num" data-sort="dur">duration' +
        arrow('dur') + '</th><th data-sort="start">start (UTC)' + arrow('start') + '</th><th>thread</th></tr>';
      all.slice(0, REQ_ROWS).forEach(function (x) {
        var th = x.q.row >= 0 ? x.f.threads[x.q.row] : null;
        h += '<tr class="item' + (x.slow ? ' slow' : '') + '" data-req="' + x.f.index + ':' + x.q.index + '"><td>' +
          esc(nameOf(x.f, x.q.kind)) + ' #' + esc(x.q.id) + (x.q.flags & 4 ? ' (trigger)' : x.slow ? ' (slow)' : '') +
          '</td><td class="num">' + fmtDur(x.ns) + '</td><td class="mono">' + fmtWall(x.f.clock.wall(x.q.begin), false).slice(0, 15) +
          '</td><td>' + (th ? esc(threadLabel(th)) : '?') + '</td></tr>';
      });
      h += '</table>' + (all.length > REQ_ROWS ? '<div class="k">the first ' + REQ_ROWS + ' of ' + all.length + ' in this order</div>' : '');
    }
    openSide('requests', 'Requests (' + all.length + ')', h);
    document.querySelectorAll('#side canvas.hist').forEach(function (cv) { drawHist(cv, groups[+cv.dataset.g]); });
  }
  // A latency histogram: log-spaced bins from the fastest to the slowest.
  function drawHist(cv, g) {
    var w = cv.clientWidth || 400, h = 46, dp = window.devicePixelRatio || 1, c2 = cv.getContext('2d');
    cv.width = w * dp; cv.height = h * dp; c2.setTransform(dp, 0, 0, dp, 0, 0);
    var nb = 40, lo = Math.log(Math.max(1, g.min)), hi = Math.log(Math.max(2, g.max)) + 1e-9, bins = new Array(nb).fill(0), slow = new Array(nb).fill(0);
    g.list.forEach(function (x) {
      var i = Math.min(nb - 1, Math.floor((Math.log(Math.max(1, x.ns)) - lo) / (hi - lo || 1) * nb));
      bins[i]++; if (x.slow) slow[i]++;
    });
    var mx = Math.max.apply(null, bins), bw = w / nb;
    for (var i = 0; i < nb; i++) {
      if (!bins[i]) continue;
      var bh = Math.max(1, 32 * Math.log1p(bins[i]) / Math.log1p(mx));
      c2.fillStyle = slow[i] ? '#dc2626' : '#64748b'; c2.fillRect(i * bw + 0.5, 34 - bh, bw - 1, bh);
    }
    c2.fillStyle = '#334155'; c2.font = FONT;
    c2.fillText(fmtDur(g.min), 0, 45);
    var t = fmtDur(g.max); c2.fillText(t, w - c2.measureText(t).width, 45);
  }
  function gotoRequest(f, q) {
    var th = q.row >= 0 ? f.threads[q.row] : null;
    select({ kind: 'req', file: f, r: q });
    reveal(nsOf(f, q.begin), nsOf(f, q.end), th ? reqRow(f, q) : null, true);
  }
  function openSide(kind, title, html) {
    panel = kind;
    $('side-title').textContent = title;
    $('side-body').innerHTML = html;
    // Over the tracks' right side, below the toolbar, minimap and axis.
    var top = tracks.getBoundingClientRect().top + 4;
    $('side').style.top = top + 'px';
    $('side').style.maxHeight = Math.max(120, window.innerHeight - top - 70) + 'px';
    $('side').hidden = false;
  }
  function closeSide() { panel = null; $('side').hidden = true; }

  // The trigger request of the next file that has one (files in order).
  var trigPos = -1;
  function gotoTrigger() {
    var withTrig = files.filter(function (x) { return x.trig; });
    if (!withTrig.length) return;
    trigPos = (trigPos + 1) % withTrig.length;
    var f = withTrig[trigPos], q = f.trig, th = f.threads[q.row];
    select({ kind: 'req', file: f, r: q });
    reveal(nsOf(f, q.begin), nsOf(f, q.end), th ? reqRow(f, q) : null, true);
  }

  // ---- input ------------------------------------------------------------------

  var drag = null;
  canvas.addEventListener('mousedown', function (e) {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, x0: e.clientX, y0: e.clientY, moved: false, top: tracks.scrollTop,
             range: e.shiftKey };
    if (e.shiftKey) {
      var rect = canvas.getBoundingClientRect(), t = nsAtX(Math.max(LABEL_W, e.clientX - rect.left));
      range = { a: t, b: t, live: true };
    }
    e.preventDefault();
  });
  window.addEventListener('mousemove', function (e) {
    var rect = canvas.getBoundingClientRect(), was = hoverX;
    hoverX = e.target === canvas || drag ? e.clientX - rect.left : -1;
    if (hoverX >= LABEL_W)
      $('cursor-time').textContent = fmtWall(origin + BigInt(Math.round(nsAtX(hoverX))), false) + ' UTC';
    if (was !== hoverX && !drag) redraw();
    showTip(e.target === canvas ? e : null);
    if (drag) {
      if (Math.abs(e.clientX - drag.x0) + Math.abs(e.clientY - drag.y0) > 3) {
        drag.moved = true; canvas.classList.add('dragging');
      }
      if (drag.moved && drag.range) {
        range.b = nsAtX(Math.max(LABEL_W, e.clientX - rect.left));
      } else if (drag.moved) {
        pan(drag.x - e.clientX);
        tracks.scrollTop = drag.top - (e.clientY - drag.y0);
      }
      drag.x = e.clientX; drag.y = e.clientY;
    }
    if (drag) redraw();
  });
  window.addEventListener('mouseup', function (e) {
    if (!drag) return;
    var d = drag; drag = null; canvas.classList.remove('dragging');
    if (d.range) {
      if (d.moved) selectRange(range.a, range.b); else { range = null; redraw(); }
      return;
    }
    if (!d.moved) {
      var rect = canvas.getBoundingClientRect();
      select(pick(e.clientX - rect.left, e.clientY - rect.top));
    }
  });
  canvas.addEventListener('wheel', function (e) {
    e.preventDefault();
    var rect = canvas.getBoundingClientRect(), x = e.clientX - rect.left;
    var dy = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY, dx = e.deltaMode === 1 ? e.deltaX * 16 : e.deltaX;
    if (e.shiftKey && !dx) { dx = dy; dy = 0; }
    if (Math.abs(dx) > Math.abs(dy)) pan(dx);
    else zoomAt(Math.max(x, LABEL_W), Math.exp(dy * 0.002));
  }, { passive: false });
  tracks.addEventListener('scroll', redraw);
  window.addEventListener('resize', resize);
  $('labels').addEventListener('click', function (e) {
    var el = e.target.closest('.row-label.thread');
    if (!el) return;
    var r = rows[+el.dataset.row];
    r.th.folded = !r.th.folded;
    layout(); redraw();
  });
  mini.addEventListener('mousedown', function (e) {
    function go(ev) {
      var rect = mini.getBoundingClientRect(), x = ev.clientX - rect.left - LABEL_W;
      var c = x / trackW() * pageEnd, span = view.end - view.start;
      setView(c - span / 2, c + span / 2);
    }
    go(e);
    function up() { window.removeEventListener('mousemove', go); window.removeEventListener('mouseup', up); }
    window.addEventListener('mousemove', go); window.addEventListener('mouseup', up);
  });
  $('search').addEventListener('input', scheduleSearch);
  $('min-dur').addEventListener('input', scheduleSearch);
  $('max-dur').addEventListener('input', scheduleSearch);
  $('side-close').addEventListener('click', closeSide);
  $('side-body').addEventListener('click', function (e) {
    var tr = e.target.closest('tr.item'), th = e.target.closest('th[data-sort]');
    if (th) { reqSort(th.dataset.sort); return; }
    if (!tr) return;
    if (tr.dataset.i !== undefined && panel === 'search') {
      search.pos = +tr.dataset.i; step(0);
    } else if (tr.dataset.req !== undefined) {
      var p = tr.dataset.req.split(':'), f = files[+p[0]];
      gotoRequest(f, f.reqs[+p[1]]);
    } else if (tr.dataset.func !== undefined && panel === 'range') {
      $('search').value = tr.dataset.func; runSearch(tr.dataset.func);
    }
  });
  $('search').addEventListener('keydown', function (e) {
    if (e.key === 'Enter') { step(e.shiftKey ? -1 : 1); e.preventDefault(); }
    if (e.key === 'Escape') { e.target.blur(); }
  });
  $('next').addEventListener('click', function () { step(1); });
  $('prev').addEventListener('click', function () { step(-1); });
  $('fit').addEventListener('click', fit);
  $('goto-trigger').addEventListener('click', gotoTrigger);
  $('show-requests').addEventListener('click', toggleRequests);
  window.addEventListener('keydown', function (e) {
    if (e.target.tagName === 'INPUT' || e.ctrlKey || e.metaKey || e.altKey) return;
    var mid = LABEL_W + trackW() / 2, k = e.key;
    if (k === 'w' || k === 'W' || k === '+' || k === '=') zoomAt(mid, 0.7);
    else if (k === 's' || k === 'S' || k === '-') zoomAt(mid, 1 / 0.7);
    else if (k === 'a' || k === 'A' || k === 'ArrowLeft') pan(-trackW() / 5);
    else if (k === 'd' || k === 'D' || k === 'ArrowRight') pan(trackW() / 5);
    else if (k === '0' || k === 'Home') fit();
    else if (k === '/') { $('search').focus(); }
    else if (k === 'n') step(1);
    else if (k === 'N') step(-1);
    else if (k === 't') gotoTrigger();
    else if (k === 'r') toggleRequests();
    else if (k === 'Escape') { if (panel) closeSide(); else { range = null; select(null); } }
    else return;
    e.preventDefault();
  });

  // ---- the page's API (tests, console) --------------------------------------

  var ktrace = window.ktrace = {
    frames: 0, lastFrameMs: 0, loadMs: 0, calls: nCalls, files: files,
    view: function () { return { start: view.start, end: view.end, top: tracks.scrollTop }; },
    setView: function (a, b) { setView(a, b); },
    // Search as the toolbar does (min, max: duration text or ''); the
    // figures it shows: count, total, min, max (ns), the longest matches,
    // and the ms the query took.
    search: function (q, min, max) {
      $('search').value = q; $('min-dur').value = min || ''; $('max-dur').value = max || '';
      runSearch(q);
      var r = search.res || { count: 0, totalNs: 0, minNs: 0, maxNs: 0, top: [] };
      return { count: r.count, totalNs: r.totalNs, minNs: r.minNs, maxNs: r.maxNs, ms: search.ms,
               top: r.top.slice(0, 50).map(function (m) { return { name: m.f.funcs[m.th.func[m.k]], ns: m.dur }; }),
               text: $('search-count').textContent, panel: $('side').hidden ? '' : $('side-body').innerText };
    },
    next: function () { step(1); },
    gotoTrigger: gotoTrigger,
    // Page ns span of a request (for tests: is it in view?).
    triggerSpan: function () {
      var f = files.filter(function (x) { return x.trig; })[Math.max(trigPos, 0)];
      return f ? { start: nsOf(f, f.trig.begin), end: nsOf(f, f.trig.end) } : null;
    },
    // Client coordinates of the middle of the nth call (in time order) of
    // the function named name, brought into view first; null if none.
    locateCall: function (name, nth) {
      var m = callsOf(name)[nth || 0];
      if (!m) return null;
      goMatch(m);
      select(null);
      draw();
      var r = threadRow(m.th, m.d), rect = canvas.getBoundingClientRect();
      var a = Math.max(xOf(nsOf(m.f, m.th.begin[m.k])), LABEL_W), b = Math.min(xOf(nsOf(m.f, m.th.end[m.k])), W);
      return { x: rect.left + (a + b) / 2, y: rect.top + r.y - tracks.scrollTop + r.h / 2,
               durationNs: m.f.clock.durNs(m.th.end[m.k] - m.th.begin[m.k]), thread: threadLabel(m.th) };
    },
    // Time to draw a frame at the current view (ms), median of n.
    frameMs: function (n) {
      var t = [];
      for (var i = 0; i < (n || 5); i++) { var a = performance.now(); draw(); t.push(performance.now() - a); }
      t.sort(function (x, y) { return x - y; });
      return t[t.length >> 1];
    },
    pan: pan, zoomAt: function (f) { zoomAt(LABEL_W + trackW() / 2, f); },
    // The requests panel's content: per kind, then every request.
    requests: function () {
      showRequests();
      return requestGroups().map(function (g) {
        return { kind: g.name, n: g.n, p50: g.p50, p99: g.p99, max: g.max, threshold: g.threshold === Infinity ? null : g.threshold,
                 list: g.list.map(function (x) { return { id: x.q.id, ns: x.ns, slow: x.slow, trigger: !!(x.q.flags & 4) }; }) };
      });
    },
    // Click the request panel's row of request id (of kind), as a person would.
    clickRequest: function (id) {
      showRequests();
      var tr = Array.prototype.find.call(document.querySelectorAll('#req-table tr.item'), function (e) {
        return new RegExp('#' + id + '( |$)').test(e.firstChild.textContent);
      });
      if (tr) tr.click();
      return !!tr;
    },
    selectRange: function (a, b) { return selectRange(a, b); },
    // Click (select) what is at page ns t in a row of thread (or cpu) tid.
    clickAt: function (t, tid, what) {
      var r = rows.find(function (x) {
        if (what === 'core') return x.kind === 'core' && x.core.cpu === tid;
        return x.th && x.th.tid === tid && (typeof what === 'number' ? x.kind === 'depth' && x.depth === what : x.kind === what);
      });
      if (!r) return false;
      select(pick(xOf(t), r.y - tracks.scrollTop + r.h / 2));
      return !!sel;
    },
    searchPending: function () { return search.timer !== null; },
    axisLabels: function () { draw(); return axisDrawn; },
    shown: function () { return { panel: panel, title: $('side-title').textContent, text: $('side').hidden ? '' : $('side-body').innerText, details: $('details').innerText }; },
    // For pixel probes (tests/html/viewercheck.py): the page-ns span and the
    // row of the nth call (time order) of the function named name, without
    // moving the view; the canvas rectangle (CSS px) of a row; the colour
    // of a canvas pixel after drawing the current view.
    callSpan: function (name, nth) {
      var all = [];
      files.forEach(function (f) {
        var fi = f.funcs.indexOf(name);
        if (fi < 0) return;
        f.threads.forEach(function (th) {
          for (var d = 0; d <= th.maxdepth && th.n; d++)
            for (var k = th.lane[d]; k < th.lane[d + 1]; k++)
              if (th.func[k] === fi) all.push({ f: f, th: th, k: k, d: d });
        });
      });
      all.sort(function (a, b) { return nsOf(a.f, a.th.begin[a.k]) - nsOf(b.f, b.th.begin[b.k]); });
      var m = all[nth || 0];
      if (!m) return null;
      return { start: nsOf(m.f, m.th.begin[m.k]), end: nsOf(m.f, m.th.end[m.k]), tid: m.th.tid, depth: m.d };
    },
    rowRect: function (tid, what) {
      var r = rows.find(function (x) {
        if (typeof what === 'number') return x.th && x.th.tid === tid && x.kind === 'depth' && x.depth === what;
        if (what === 'core') return x.kind === 'core' && x.core.cpu === tid;
        return x.th && x.th.tid === tid && x.kind === what;
      });
      if (!r) return null;
      if (r.y < tracks.scrollTop || r.y + r.h > tracks.scrollTop + H) { tracks.scrollTop = Math.max(0, r.y - 20); }
      return { y: r.y - tracks.scrollTop, h: r.h };
    },
    xOf: function (ns) { return xOf(ns); },
    fit: function () { fit(); },
    // The hover text at the begin of span (from callSpan) in its row.
    tipAt: function (sp) {
      var r = rows.find(function (x) {
        if (sp.depth === 'core') return x.kind === 'core' && x.core.cpu === sp.tid;
        return x.th && x.th.tid === sp.tid && x.kind === 'depth' && x.depth === sp.depth;
      });
      if (!r) return null;
      var s = pick(xOf(sp.start) + 0.01, r.y - tracks.scrollTop + r.h / 2);
      return s ? tipText(s) : null;
    },
    pixel: function (x, y) {
      draw();
      var p = ctx.getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data;
      return [p[0], p[1], p[2], p[3]];
    }
  };

  // Links into the page: #search=NAME (search, go to the longest call),
  // #call=NAME:N (select the Nth call of NAME, 0-based, in time order),
  // #trigger (go to the slow request); parts joined by '&'.
  function applyHash() {
    decodeURIComponent(location.hash.slice(1)).split('&').forEach(function (part) {
      var eq = part.indexOf('='), key = eq < 0 ? part : part.slice(0, eq), val = part.slice(eq + 1);
      if (key === 'search' && val) { $('search').value = val; runSearch(val); step(1); }
      else if (key === 'call' && val) {
        var colon = val.lastIndexOf(':'), nth = colon < 0 ? 0 : +val.slice(colon + 1) || 0;
        var all = callsOf(colon < 0 ? val : val.slice(0, colon));
        if (nth < all.length) goMatch(all[nth]);
      }
      else if (key === 'trigger') gotoTrigger();
    });
  }
  window.addEventListener('hashchange', applyHash);

  buildHeader();
  layout();
  var t_d = performance.now();
  buildDensity();
  phase.density = performance.now() - t_d;
  resize();
  fit();
  draw();
  ktrace.loadMs = performance.now() - t_start;   // unpacking and the first frame
  ktrace.phase = phase;
  phase.scriptStart = t_start;                   // ms after navigation began
  ktrace.openMs = performance.now();             // since navigation began
  var st = $('status');
  st.textContent = 'ready: ' + nCalls + ' calls in ' + ktrace.loadMs.toFixed(0) + ' ms';
  if (location.hash.length > 1) applyHash();
  st.dataset.ready = '1';
})();
