"""logits_vs_refs.py TOOL MODEL REFS.json [TOL]: run TOOL (model-logits) on
every sequence of REFS.json (transformers' float32 logits of every
position) and check max |ours - ref| / max |ref| <= TOL (1e-4) at every
position; prints the worst relative error per sequence."""
import json
import subprocess
import sys

import numpy as np

tool, model, refs = sys.argv[1:4]
tol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-4
bad = 0
for i, s in enumerate(json.load(open(refs))["sequences"]):
    ids = s["input_ids"]
    out = subprocess.run([tool, "-t", "2", model, "-"] + [str(t) for t in ids],
                         capture_output=True, check=True).stdout
    ours = np.frombuffer(out, dtype=np.float32).reshape(len(ids), -1)
    ref = np.array(s["logits"], dtype=np.float32)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    rel = np.abs(ours - ref).max(axis=1) / np.abs(ref).max(axis=1)
    print(f"sequence {i}: {len(ids)} positions, worst relative error {rel.max():.2e} at {rel.argmax()}")
    bad += int((rel > tol).any())
sys.exit(1 if bad else 0)
