#!/usr/bin/env python3
"""decoder_layers.py LIBKTRACE_DECODER.a - the decoder's files call each
other without circles, and no output format's file (out-*.c) calls into
another's.

Reads which file defines and which uses each global symbol (nm -A on the
archive), makes the graph file -> files it calls, and fails (exit 1,
"FAIL ..." lines) on a strongly connected component of more than one file
or an edge between two out-*.c files.  Prints the graph and its longest
chain of calls ("floors").  Exit 77 (skipped) without nm."""
import collections
import shutil
import subprocess
import sys


def main():
    if not shutil.which('nm'):
        print('nm not found: skipped')
        return 77
    out = subprocess.run(['nm', '-A', sys.argv[1]], capture_output=True, text=True,
                         check=True).stdout
    defs, uses = {}, collections.defaultdict(set)
    for line in out.splitlines():
        parts = line.split(':')   # archive:member:  value type name
        if len(parts) < 3:
            continue
        obj, rest = parts[-2], parts[-1]
        f = obj[:-4] if obj.endswith('.c.o') else obj
        p = rest.split()
        if len(p) == 3 and p[1] in 'TDBR':
            defs[p[2]] = f
        elif len(p) == 2 and p[0] == 'U':
            uses[f].add(p[1])
    g = collections.defaultdict(set)
    for f, us in uses.items():
        for u in us:
            if u in defs and defs[u] != f:
                g[f].add(defs[u])
    bad = 0
    # circles: Tarjan
    index, low, stack, on, comps = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
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

    for v in sorted(set(g) | set(uses)):
        if v not in index:
            visit(v)
    for c in comps:
        if len(c) > 1:
            print('FAIL circle: %s' % ' '.join(sorted(c)))
            bad += 1
    for f in sorted(g):
        for t in sorted(g[f]):
            if f.startswith('out-') and t.startswith('out-'):
                print('FAIL sink %s calls sink %s' % (f, t))
                bad += 1
    memo = {}

    def floors(v):
        if v not in memo:
            memo[v] = 0
            memo[v] = 1 + max([floors(w) for w in g[v]] + [0])
        return memo[v]

    for f in sorted(g):
        print('%s -> %s' % (f, ' '.join(sorted(g[f]))))
    if not bad:
        print('floors %d' % max(floors(v) for v in g))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
