#!/usr/bin/env python3
"""chat-peer.py RENDERER TEMPLATE CASES.json: render every case with the C
renderer (RENDERER TEMPLATE CONTEXT, e.g. build/t/tools/chat-render) and with
jinja2 the transformers way (tools/chat-render.py), and compare byte for byte.

CASES.json is a list of objects {"name": ..., "context": {...}} (a missing
"context" means the object itself, less "name", is the context).  TEMPLATE
"-" takes each case's own "template" member instead (small feature cases).
Both sides must agree on failure too: when jinja2 raises, the C renderer must
exit 1.  Prints one line per disagreement with the first differing byte and
exits 1 if there was any; prints "N cases agree" otherwise.
"""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
ref = os.path.join(here, "chat-render.py")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace").strip()


def first_diff(a, b):
    n = min(len(a), len(b))
    i = next((k for k in range(n) if a[k] != b[k]), n)
    ctx = lambda s: s[max(0, i - 30):i + 30]
    return "first difference at byte %d: ours %r, jinja2 %r" % (i, ctx(a), ctx(b))


def main():
    if len(sys.argv) != 4:
        sys.stderr.write("usage: chat-peer.py renderer template cases.json\n")
        return 2
    renderer, tmpl, casef = sys.argv[1:]
    cases = json.load(open(casef, encoding="utf-8"))
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for i, case in enumerate(cases):
            name = case.get("name", str(i))
            ctx = case.get("context", {k: v for k, v in case.items() if k not in ("name", "template")})
            cpath = os.path.join(d, "ctx.json")
            with open(cpath, "w", encoding="utf-8") as f:
                json.dump(ctx, f, ensure_ascii=False)
            t = tmpl
            if tmpl == "-":
                t = os.path.join(d, "t.jinja")
                with open(t, "w", encoding="utf-8", newline="") as f:
                    f.write(case["template"])
            rc_c, out_c, err_c = run([renderer, t, cpath])
            rc_p, out_p, err_p = run([sys.executable, ref, t, cpath])
            if rc_p != 0:
                if rc_c != 1:
                    print("case %s: jinja2 fails (%s) but ours exits %d" % (name, err_p, rc_c))
                    bad += 1
                continue
            if rc_c != 0:
                print("case %s: ours fails (%s) but jinja2 renders %r" % (name, err_c, out_p[:80]))
                bad += 1
            elif out_c != out_p:
                print("case %s: %s" % (name, first_diff(out_c, out_p)))
                bad += 1
    if bad:
        return 1
    print("%d cases agree" % len(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
