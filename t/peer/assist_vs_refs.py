"""assist_vs_refs.py TOOL TRUNK DRAFT REFS.json [TOL]: run TOOL (model-assist)
on every prompt of REFS.json (transformers' gemma4_assistant draft steps
after it) and check each step's max |ours - ref| / max |ref| <= TOL (1e-4)
and the trunk's token and every draft equal; prints the worst relative
error per prompt.  Plain Python (no numpy)."""
import json
import struct
import subprocess
import sys

tool, trunk, draft, refs = sys.argv[1:5]
tol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-4
bad = 0
for i, d in enumerate(json.load(open(refs))["drafts"]):
    k = len(d["steps"])
    r = subprocess.run([tool, "-t", "2", "-k", str(k), trunk, draft, "-"] +
                       [str(t) for t in d["input_ids"]], capture_output=True, check=True)
    nv = len(d["steps"][0]["logits"])
    ours = struct.unpack("<%df" % (k * nv), r.stdout)
    worst = 0.0
    for j, s in enumerate(d["steps"]):
        row = ours[j * nv:(j + 1) * nv]
        scale = max(abs(v) for v in s["logits"])
        worst = max(worst, max(abs(a - b) for a, b in zip(row, s["logits"])) / scale)
    ids = list(map(int, r.stderr.split()))
    want = [d["first"]] + [s["id"] for s in d["steps"]]
    print(f"prompt {i}: {k} steps, worst relative error {worst:.2e}, ids {'equal' if ids == want else 'DIFFER'}")
    bad += worst > tol or ids != want
sys.exit(1 if bad else 0)
