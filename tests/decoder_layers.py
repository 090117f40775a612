#!/usr/bin/env python3
"""decoder_layers.py DECODER_SRC_DIR [LIBKTRACE_DECODER.a] - the decoder's
files depend on each other in layers.

From the sources (DECODER_SRC_DIR, always):
  - the include graph among decoder/*.c and *.h has no circle;
  - no decoder/*.c includes decoder.h (the header of everything, for
    programs outside decoder/): each file includes what it uses;
  - an output format's file (out-NAME.c) includes, directly or through
    other headers, no other format's header (out-*.h but its own) and no
    reader or builder header (read.h, iter.h, build.h): a sink depends on
    the stream (stream.h), the sink header (sink.h), the decoded result
    and the helpers.

From the library (nm -A on the archive; skipped without nm or without the
argument): which file defines and which uses each global symbol gives the
graph file -> files it calls; a circle of more than one file, or an edge
between two out-*.c files, fails.  And every global symbol says its file:
it is kd_FILE or starts with kd_FILE_ (FILE the object's name, '-' as
'_': kd_range_walk_cut in range.c, kd_out_text_line in out-text.c), or
with the prefix of the struct the file owns (OWNER below), or is one of
util.c's few basic names (UTIL below).

Prints the graphs and their longest chains ("floors").  Exit 1 with
"FAIL ..." lines, 0 when all hold.  A self-test runs the checks on made-up
bad graphs first, so a check that can no longer fail fails too."""
import collections
import os
import re
import shutil
import subprocess
import sys

# Headers a sink must not reach: the reader's and the builder's internals,
# and the umbrella (which includes every other sink).
SINK_FORBIDDEN = {'read.h', 'iter.h', 'build.h', 'decoder.h'}

# Files whose functions are named after the struct they own (struct
# kd_snap is what read.c makes; struct kd_ctree, kd_collector, kd_elf) or,
# for the generated html_template.c, after the html/ directory.
OWNER = {
    'read': 'kd_snap',
    'calltree': 'kd_ctree',
    'collect': 'kd_collector',
    'symbols': 'kd_elf',
    'html_template': 'kd_html',
}
# util.c: the allocators, the growable array and the other basic
# vocabulary every file uses (util.h); kd_util_* is util.c's too.
UTIL = re.compile(r'kd_x(malloc|calloc|realloc|strdup)$|kd_grow$|kd_mix64$|kd_crc32c$'
                  r'|kd_umap_\w+$|kd_strpool_\w+$|kd_warn$|kd_warnings_\w+$')


def circles(g):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    nodes = set(g) | {w for vs in g.values() for w in vs}
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return [sorted(c) for c in comps if len(c) > 1]


def floors(g):
    memo = {}

    def f(v):
        if v not in memo:
            memo[v] = 0
            memo[v] = 1 + max([f(w) for w in g.get(v, ())] + [0])
        return memo[v]

    return max([f(v) for v in g] + [0])


def reach(g, v):
    seen, todo = set(), [v]
    while todo:
        for w in g.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def check_includes(g):
    """g: file -> files it includes (decoder files only).  FAIL lines."""
    bad = ['FAIL include circle: %s' % ' '.join(c) for c in circles(g)]
    for f in sorted(g):
        if f.endswith('.c') and 'decoder.h' in g[f]:
            bad.append('FAIL %s includes decoder.h (include what you use)' % f)
        m = re.match(r'out-(.*)\.c$', f)
        if not m:
            continue
        own = 'out-%s.h' % m.group(1)
        for h in sorted(reach(g, f)):
            if h in SINK_FORBIDDEN:
                bad.append('FAIL sink %s reaches %s (reader/builder internals)' % (f, h))
            elif h.startswith('out-') and h.endswith('.h') and h != own:
                bad.append('FAIL sink %s reaches another sink\'s header %s' % (f, h))
    return bad


def check_calls(g):
    """g: file -> files whose symbols it uses.  FAIL lines."""
    bad = ['FAIL call circle: %s' % ' '.join(c) for c in circles(g)]
    for f in sorted(g):
        for t in sorted(g[f]):
            if f.startswith('out-') and t.startswith('out-'):
                bad.append('FAIL sink %s calls sink %s' % (f, t))
    return bad


def check_prefixes(defs):
    """defs: symbol -> file defining it.  FAIL lines."""
    bad = []
    for s, f in sorted(defs.items()):
        stems = ['kd_' + f.replace('-', '_')] + ([OWNER[f]] if f in OWNER else [])
        if any(s == p or s.startswith(p + '_') for p in stems):
            continue
        if f == 'util' and UTIL.match(s):
            continue
        bad.append('FAIL %s defined in %s.c: its name should start with %s_'
                   % (s, f, stems[0]))
    return bad


def self_test():
    """Each check must fail on a graph that breaks its rule."""
    cases = [
        (check_includes, {'a.h': {'b.h'}, 'b.h': {'a.h'}}),
        (check_includes, {'x.c': {'decoder.h'}}),
        (check_includes, {'out-a.c': {'out-a.h', 'sink.h'}, 'sink.h': {'out-b.h'}}),
        (check_includes, {'out-a.c': {'helper.h'}, 'helper.h': {'read.h'}}),
        (check_calls, {'a': {'b'}, 'b': {'c'}, 'c': {'a'}}),
        (check_calls, {'out-a': {'out-b'}}),
        (check_prefixes, {'kd_dec_walk_cut': 'range'}),
        (check_prefixes, {'kd_snap_wall_ns': 'time'}),
        (check_prefixes, {'kd_xmalloc': 'names'}),
    ]
    good = [
        (check_includes, {'out-a.c': {'out-a.h', 'sink.h'}, 'out-a.h': {'sink.h'},
                          'sink.h': {'stream.h'}}),
        (check_calls, {'out-a': {'names'}, 'names': {'util'}}),
        (check_prefixes, {'kd_range_walk_cut': 'range', 'kd_out_text': 'out-text',
                          'kd_snap_read': 'read', 'kd_xmalloc': 'util'}),
    ]
    ok = all(fn(g) for fn, g in cases) and not any(fn(g) for fn, g in good)
    if not ok:
        print('FAIL self-test: a check does not tell a bad graph from a good one')
    return ok


def include_graph(src):
    files = sorted(f for f in os.listdir(src) if f.endswith(('.c', '.h')))
    g = {}
    for f in files:
        with open(os.path.join(src, f), encoding='utf-8') as fh:
            incs = re.findall(r'^\s*#\s*include\s+"([^"]+)"', fh.read(), flags=re.M)
        g[f] = {i for i in incs if i in files}
    return g


def call_graph(lib):
    out = subprocess.run(['nm', '-A', lib], capture_output=True, text=True,
                         check=True).stdout
    defs, uses = {}, collections.defaultdict(set)
    for line in out.splitlines():
        parts = line.split(':')   # archive:member:  value type name
        if len(parts) < 3:
            continue
        obj, rest = parts[-2], parts[-1]
        f = obj[:-4] if obj.endswith('.c.o') else obj
        p = rest.split()
        # a sanitizer's own symbols (ASan's __odr_asan.NAME per global)
        if len(p) >= 2 and p[-1].startswith(('__odr_asan', '__asan', '__tsan', '__ubsan',
                                             '__sanitizer', '__sancov')):
            continue
        if len(p) == 3 and p[1] in 'TDBR':
            defs[p[2]] = f
        elif len(p) == 2 and p[0] == 'U':
            uses[f].add(p[1])
    g = collections.defaultdict(set)
    for f, us in uses.items():
        g[f]   # every file a node
        for u in us:
            if u in defs and defs[u] != f:
                g[f].add(defs[u])
    return dict(g), defs


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    bad = [] if self_test() else ['self-test']
    ig = include_graph(sys.argv[1])
    fails = check_includes(ig)
    for f in sorted(ig):
        if ig[f]:
            print('include %s -> %s' % (f, ' '.join(sorted(ig[f]))))
    print('include floors %d' % floors(ig))
    bad += fails
    if len(sys.argv) > 2:
        if shutil.which('nm'):
            cg, defs = call_graph(sys.argv[2])
            bad += check_calls(cg)
            bad += check_prefixes(defs)
            for f in sorted(cg):
                print('calls %s -> %s' % (f, ' '.join(sorted(cg[f]))))
            print('call floors %d' % floors(cg))
        else:
            print('nm not found: the call graph is not checked')
    for b in bad:
        if b.startswith('FAIL'):
            print(b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
