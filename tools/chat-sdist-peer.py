#!/usr/bin/env python3
"""chat-sdist-peer.py SDIST RENDERER CASES.json [SKIPS]: render every real
chat template that the llama-cpp-python sdist vendors (models/templates/*.jinja
of its llama.cpp, extracted at run time, never committed) on every
conversation of CASES.json, with the C renderer (RENDERER TEMPLATE CONTEXT,
build/t/tools/chat-render) and with jinja2 as transformers sets it up
(tools/chat-render.py, imported here so it runs once), and compare byte for
byte.  Where jinja2 raises, the C renderer must exit 1 too.

SKIPS is a file of "NAME.jinja: reason" lines: templates left out on purpose
(reviewed; each must exist in the sdist, so a stale entry fails).  Prints one
line per disagreement (template, case, first differing byte with context) and a
summary "T templates x C cases: N agree (J both fail), S skipped"; exit 1 on any
disagreement.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("chat_render", os.path.join(here, "chat-render.py"))
cr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cr)
import jinja2  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402


def env():
    e = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                      extensions=[cr.AssistantTracker, jinja2.ext.loopcontrols])
    e.filters["tojson"] = cr.tojson
    e.globals["raise_exception"] = cr.raise_exception
    e.globals["strftime_now"] = cr.strftime_now
    return e


def reference(tmpl, ctx):
    if isinstance(tmpl, Exception):
        return tmpl
    kwargs = {"tools": None, "documents": None, "add_generation_prompt": False}
    kwargs.update(ctx)
    try:
        return tmpl.render(**kwargs).encode("utf-8", "surrogatepass")
    except Exception as x:
        return x


def first_diff(a, b):
    n = min(len(a), len(b))
    i = next((k for k in range(n) if a[k] != b[k]), n)
    ctx = lambda s: s[max(0, i - 40):i + 40]
    return "first difference at byte %d: ours %r, jinja2 %r" % (i, ctx(a), ctx(b))


def extract(sdist, d):
    out = {}
    with tarfile.open(sdist) as t:
        for m in t.getmembers():
            p = m.name.split("/")
            if m.isfile() and len(p) >= 2 and p[-2] == "templates" and \
                    "/vendor/llama.cpp/models/templates/" in m.name and p[-1].endswith(".jinja"):
                out[p[-1]] = t.extractfile(m).read()
    for name, b in out.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(b)
    return sorted(out)


def main():
    if len(sys.argv) not in (4, 5):
        sys.stderr.write("usage: chat-sdist-peer.py sdist renderer cases.json [skips]\n")
        return 2
    sdist, renderer, casef = sys.argv[1:4]
    skips = {}
    if len(sys.argv) == 5:
        for line in open(sys.argv[4], encoding="utf-8"):
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, why = line.partition(":")
                skips[name.strip()] = why.strip()
    cases = json.load(open(casef, encoding="utf-8"))
    e = env()
    bad = agree = bothfail = 0
    with tempfile.TemporaryDirectory() as d:
        names = extract(sdist, d)
        if not names:
            print("%s: no models/templates/*.jinja" % sdist)
            return 1
        for s in sorted(set(skips) - set(names)):
            print("skip list names %s, which the sdist does not have" % s)
            bad += 1
        run = [n for n in names if n not in skips]
        cpath = os.path.join(d, "ctx.json")
        for name in run:
            path = os.path.join(d, name)
            source = open(path, encoding="utf-8", newline="").read()
            try:
                tmpl = e.from_string(source)
            except Exception as x:
                tmpl = x
            for i, case in enumerate(cases):
                cname = case.get("name", str(i))
                ctx = case.get("context", {k: v for k, v in case.items() if k != "name"})
                with open(cpath, "w", encoding="utf-8") as f:
                    json.dump(ctx, f, ensure_ascii=False)
                p = subprocess.run([renderer, path, cpath], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
                ref = reference(tmpl, ctx)
                err = p.stderr.decode("utf-8", "replace").strip()
                if isinstance(ref, Exception):
                    if p.returncode != 1:
                        print("%s %s: jinja2 fails (%s: %s) but ours exits %d"
                              % (name, cname, type(ref).__name__, ref, p.returncode))
                        bad += 1
                    else:
                        bothfail += 1
                        agree += 1
                elif p.returncode != 0:
                    print("%s %s: ours fails (%s) but jinja2 renders %r" % (name, cname, err, ref[:60]))
                    bad += 1
                elif p.stdout != ref:
                    print("%s %s: %s" % (name, cname, first_diff(p.stdout, ref)))
                    bad += 1
                else:
                    agree += 1
    print("%d templates x %d cases: %d agree (%d where both fail), %d disagree, %d templates skipped"
          % (len(run), len(cases), agree, bothfail, bad, len(skips)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
