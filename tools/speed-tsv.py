#!/usr/bin/env python3
"""speed-tsv.py: TSV receipt rows (DESIGN.md's columns) from model-bench logs.

    python3 tools/speed-tsv.py DATE COMMIT LOG [LABEL [COPY_GBS]] >> bench/DATE/DATE-topic.tsv

LOG is a speed-9b log of tools/gpu-run.sh (GPU_RUN_9B=1): '== TYPE' headers,
then model-bench lines.  Its base name goes into the log column: copy it into
bench/DATE/ beside the TSV.  LABEL goes into the scenario column (e.g. "f32x").
COPY_GBS: the device copy bandwidth model-bench was given (-B; default
3943.6, kernel-check --bench on the H200 of these runs).
"""
import os
import re
import sys

date, commit, log = sys.argv[1:4]
label = sys.argv[4] if len(sys.argv) > 4 else ""
copy = sys.argv[5] if len(sys.argv) > 5 else "3943.6"
gpu, quant, reps = "NVIDIA H200", "?", {}
cols = "date commit gpu binary model quant scenario ctx n median min max unit peer peer_median ratio log".split()


def row(**kw):
    kw.setdefault("min", "-"), kw.setdefault("max", "-"), kw.setdefault("peer", "-")
    kw.setdefault("peer_median", "-"), kw.setdefault("ratio", "-")
    base = dict(date=date, commit=commit, gpu=gpu, binary="model-bench",
                model="random qwen35 9B shape (gguf-random -p 9b)", quant=quant,
                log=os.path.basename(log))
    base.update(kw)
    if label:
        base["scenario"] = base["scenario"] + "-" + label
    print("\t".join(str(base[c]) for c in cols))


for line in open(log):
    f = line.rstrip("\n").split("\t")
    if line.startswith("== "):
        quant = line[3:].strip()
    elif f[0] == "decode":
        reps.setdefault(f[2], []).append(float(f[8]))
    elif f[0] == "prefill":
        ctx, s, tps = f[2], float(f[4]), float(f[6])
        row(scenario="prefill", ctx=ctx, n=1, median="%.1f" % tps, unit="tok/s")
        if ctx == "2048":
            row(scenario="ttft-2k", ctx=ctx, n=1, median="%.3f" % s, unit="s")
    elif f[0] == "decode-median":
        ctx, n, r, tps, gbs, frac = f[2], f[4], f[6], float(f[8]), float(f[12]), float(f[14])
        v = reps.pop(ctx, [tps])
        row(scenario="decode", ctx=ctx, n=r, median="%.2f" % tps, min="%.2f" % min(v),
            max="%.2f" % max(v), unit="tok/s")
        row(scenario="decode-bw", ctx=ctx, n=r, median="%.1f" % gbs, unit="GB/s",
            peer="d2d-copy", peer_median=copy,
            ratio="%.3f" % frac)
    elif f[0] == "verify":
        row(scenario="verify-K%s" % f[2], ctx=128, n=5, median=f[8], unit="x-decode-step",
            peer="decode-step", ratio=f[8])
