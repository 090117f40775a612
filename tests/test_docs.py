#!/usr/bin/env python3
"""tests/test_docs.py - every command the README and docs/ mark runnable
works as written, and every link between the pages leads somewhere.

    tests/test_docs.py --src SOURCE_DIR --build BUILD_DIR

Markers, on the line before a fenced block:

    <!-- file: NAME -->   the block is the file NAME (written, not run)
    <!-- run -->          the block is a shell script: run with bash -e
    <!-- run: repo -->    the same, "from the top of this repository" after
                          a build into build/: run in a directory that
                          links to SOURCE_DIR's files and has build ->
                          BUILD_DIR (what it writes stays there)

README.md comes first, then docs/*.md in name order; all of them share one
temporary directory, so a page may use a file an earlier one made (the
README's myprog.c).  ktrace is installed from BUILD_DIR into a prefix in
that directory, and the variables a system install would make unneeded
point the tools at it (PATH, LIBRARY_PATH, C_INCLUDE_PATH,
CPLUS_INCLUDE_PATH, LD_LIBRARY_PATH, PKG_CONFIG_PATH, CMAKE_PREFIX_PATH):
so `cc ... -lktrace` and `ktrace-decode` run as the pages write them.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARK = re.compile(r"^<!--\s*(run: repo|run|file:\s*(\S+))\s*-->\s*$")
FENCE = re.compile(r"^```")
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def blocks(path):
    """(kind, name, text, line) for each marked block of path."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if m and i + 1 < len(lines) and FENCE.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and not FENCE.match(lines[j]):
                j += 1
            text = "\n".join(lines[i + 2:j]) + "\n"
            kind = {"run": "run", "run: repo": "repo"}.get(m.group(1), "file")
            out.append((kind, m.group(2), text, i + 2))
            i = j
        elif m:
            out.append(("bad", None, None, i + 1))
        i += 1
    return out


def check_links(path, src):
    bad = []
    text = open(path, encoding="utf-8").read()
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):
            continue
        full = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if not os.path.exists(full):
            bad.append("%s: link to %s, which does not exist" % (os.path.relpath(path, src), target))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()
    src = os.path.abspath(a.src)
    pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))

    failures = []
    for p in pages:
        failures += check_links(p, src)

    work = tempfile.mkdtemp(prefix="ktrace-docs-")
    prefix = os.path.join(work, "prefix")
    r = subprocess.run(["cmake", "--install", a.build, "--prefix", prefix],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print("test_docs: cmake --install %s failed:\n%s" % (a.build, r.stdout))
        return 1
    libdir = os.path.dirname(glob.glob(os.path.join(prefix, "lib*", "libktrace.so"))[0])
    env = dict(os.environ)
    for k in [k for k in env if k.startswith("KTRACE_")]:
        del env[k]   # the pages assume the defaults

    def add(var, val):
        env[var] = val + (os.pathsep + env[var] if env.get(var) else "")
    add("PATH", os.path.join(prefix, "bin"))
    add("LIBRARY_PATH", libdir)
    add("LD_LIBRARY_PATH", libdir)
    add("C_INCLUDE_PATH", os.path.join(prefix, "include"))
    add("CPLUS_INCLUDE_PATH", os.path.join(prefix, "include"))
    add("PKG_CONFIG_PATH", os.path.join(libdir, "pkgconfig"))
    add("CMAKE_PREFIX_PATH", prefix)
    run_dir = os.path.join(work, "run")
    os.mkdir(run_dir)
    repo_dir = os.path.join(work, "repo")   # the source tree's files, build -> BUILD_DIR
    os.mkdir(repo_dir)
    for e in os.listdir(src):
        if e not in ("build", ".git") and not e.startswith("build-"):
            os.symlink(os.path.join(src, e), os.path.join(repo_dir, e))
    os.symlink(os.path.abspath(a.build), os.path.join(repo_dir, "build"))

    nrun = nfile = 0
    for p in pages:
        rel = os.path.relpath(p, src)
        for kind, name, text, line in blocks(p):
            where = "%s:%d" % (rel, line)
            if kind == "bad":
                failures.append("%s: a marker not followed by a fenced block" % where)
            elif kind == "file":
                with open(os.path.join(run_dir, name), "w", encoding="utf-8") as f:
                    f.write(text)
                nfile += 1
            else:
                nrun += 1
                try:
                    r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text],
                                       cwd=repo_dir if kind == "repo" else run_dir,
                                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, timeout=120)
                    rc, out = r.returncode, r.stdout
                except subprocess.TimeoutExpired as e:
                    rc, out = "timeout (120 s)", (e.stdout or b"").decode(errors="replace")
                status = "ok" if rc == 0 else "FAILED (%s)" % rc
                print("test_docs: %s: %s" % (where, status))
                if rc != 0:
                    failures.append("%s: exit %s\n--- the block\n%s--- its output (last 40 lines)\n%s"
                                    % (where, rc, text, "\n".join(out.split("\n")[-40:])))
    if a.keep:
        print("test_docs: kept %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("test_docs: %d pages, %d runnable blocks, %d files, %d failures"
          % (len(pages), nrun, nfile, len(failures)))
    for f in failures:
        print("test_docs: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
