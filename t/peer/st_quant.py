#!/usr/bin/env python3
"""st_quant.py CHECKPOINT OUT.gguf [KV.json]: load quant-nvfp4's output with gguf-py (llama.cpp's
reader) and check it against the checkpoint: every tensor the converter rules (st_convert.py)
produce is there with its shape, dequantizes (gguf-py's own dequantizers) to within the
type's expected error of the numpy-converted source, and, with KV.json (`st-dump --tokenizer
--kvjson`), every planned metadata value is in the file unchanged.

Expected error, as the rms of (dequantized - source) over the rms of the source:
F32 at float rounding (exp), F16 and BF16 at theirs, 8-bit 1%, 5/6-bit 5%, 4-bit 13%.
Prints one line per tensor (name type relative-rms) and a closing count; exits 1 on any failure.
"""
import json, os, sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_convert import convert, fp8_scale, load_checkpoint  # noqa: E402

BOUND = {"F32": 1e-6, "F16": 1e-3, "BF16": 4e-3, "Q8_0": 0.01, "Q6_K": 0.03, "Q5_0": 0.05, "Q5_1": 0.05,
         "Q5_K": 0.05, "Q4_0": 0.13, "Q4_1": 0.13, "Q4_K": 0.13, "IQ4_NL": 0.13, "IQ4_XS": 0.13,
         "NVFP4": 0.13, "MXFP4": 0.2}


def main():
    ckpt, path = sys.argv[1:3]
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    want = convert(cfg, fp8_scale(cfg, load_checkpoint(ckpt)))
    r = gguf.GGUFReader(path)
    fails = 0
    seen = set()
    for t in r.tensors:
        seen.add(t.name)
        if t.name not in want:
            print(f"{t.name}: not in the checkpoint"); fails += 1; continue
        w = want[t.name]
        if list(t.shape) != list(reversed(w.shape)):
            print(f"{t.name}: shape {list(t.shape)}, want {list(reversed(w.shape))}"); fails += 1; continue
        got = gguf.quants.dequantize(t.data, t.tensor_type).reshape(w.shape).astype(np.float64)
        ref = w.astype(np.float64)
        den = np.sqrt(np.mean(ref ** 2)) or 1.0
        rel = float(np.sqrt(np.mean((got - ref) ** 2)) / den)
        bound = BOUND.get(t.tensor_type.name)
        ok = bound is not None and rel <= bound
        print(f"{t.name}\t{t.tensor_type.name}\t{rel:.4g}{'' if ok else '  FAIL (bound %s)' % bound}")
        fails += not ok
    for name in sorted(set(want) - seen):
        print(f"{name}: missing"); fails += 1
    if len(sys.argv) > 3:
        for k, v in json.load(open(sys.argv[3])).items():
            f = r.fields.get(k)
            got = f.contents() if f is not None else None
            if isinstance(v, float):
                same = got is not None and abs(got - v) <= 1e-6 * abs(v)
            else:
                same = got == v
            if not same:
                print(f"metadata {k}: {str(got)[:80]}, want {str(v)[:80]}"); fails += 1
    print(f"{len(r.tensors)} tensors, {fails} failures")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
