#!/usr/bin/env python3
"""Print a hub cache tree in a comparable form, one entry per line:
  d PATH | f PATH SHA256 | l PATH -> TARGET | t PATH <normalized JSON> (trees/*.json)
Temporary and incomplete files are listed too, so a leftover shows up.
"""
import hashlib
import json
import os
import sys

root = sys.argv[1]
out = []
for d, dirs, files in os.walk(root):
    for name in dirs + files:
        full = os.path.join(d, name)
        rel = os.path.relpath(full, root)
        if os.path.islink(full):
            out.append("l %s -> %s" % (rel, os.readlink(full)))
            if name in dirs:
                dirs.remove(name)
        elif os.path.isdir(full):
            out.append("d " + rel)
        elif rel.split(os.sep)[-2:-1] == ["trees"] and name.endswith(".json"):
            out.append("t %s %s" % (rel, json.dumps(json.load(open(full)), sort_keys=True)))
        elif rel.startswith(".locks" + os.sep):
            out.append("f " + rel)
        else:
            out.append("f %s %s" % (rel, hashlib.sha256(open(full, "rb").read()).hexdigest()))
print("\n".join(sorted(out)))
