#!/usr/bin/env python3
"""Byte-for-byte comparison of lib/quant (through build/t/tools/quant-cli)
with a peer: gguf-py's quants module (--ref gguf) or ggml's own reference C
(--ref ggml --peer build/peer/ggml-peer, see t/peer/ggml-ref.sh).

Quantize: many seeds of random rows plus edge cases (zeros, denormals, huge
values, ties, constant blocks), all blocks of one type in one row (blocks
are independent).  Dequantize: random block bytes.  Prints one line per
type and exits 1 on the first difference, naming the block and its case.
"""
import argparse
import subprocess
import sys
import warnings

import numpy as np

BLOCK = {"F16": (1, 2), "BF16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20),
         "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34), "Q8_1": (32, 36),
         "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176),
         "Q6_K": (256, 210), "Q8_K": (256, 292), "IQ4_NL": (32, 18), "IQ4_XS": (256, 136),
         "TQ1_0": (256, 54), "TQ2_0": (256, 66), "MXFP4": (32, 17), "NVFP4": (64, 36),
         "Q1_0": (128, 18), "Q2_0": (64, 18)}

# what each peer can check
GGUF_Q = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4"]
GGUF_D = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
          "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4"]
GGML_Q = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
          "TQ1_0", "TQ2_0", "MXFP4", "NVFP4", "Q1_0", "Q2_0"]
GGML_D = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
          "Q8_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4", "Q1_0", "Q2_0"]


def cases(blck, seeds):
    """(name, float32 array of whole blocks) pairs."""
    qk = max(blck, 256)
    out = []
    for s in range(seeds):
        r = np.random.default_rng(s)
        scale = 10.0 ** r.uniform(-6, 6)
        out.append((f"normal seed {s} scale {scale:.3g}", r.standard_normal(qk * 4) * scale))
        out.append((f"uniform seed {s}", r.uniform(-1, 1, qk * 2) * 10.0 ** r.uniform(-3, 3)))
        heavy = r.standard_t(2, qk * 2)
        out.append((f"heavy-tailed seed {s}", heavy))
        pos = np.abs(r.standard_normal(qk)) + r.uniform(0, 5)
        out.append((f"all positive seed {s}", pos))
        out.append((f"all negative seed {s}", -pos))
        sparse = r.standard_normal(qk) * (r.uniform(size=qk) < 0.05)
        out.append((f"sparse seed {s}", sparse))
        ints = r.integers(-20, 21, qk) / 2.0
        out.append((f"half-integers seed {s}", ints))
    one = np.zeros(qk)
    one[3] = 1.5
    out += [
        ("zeros", np.zeros(qk)),
        ("negative zeros", -np.zeros(qk)),
        ("one nonzero", one),
        ("constant", np.full(qk, 0.75)),
        ("negative constant", np.full(qk, -3.0)),
        ("denormals", np.random.default_rng(99).uniform(-1, 1, qk) * 1e-40),
        ("smallest denormal", np.full(qk, 1e-45)),
        ("tiny normals", np.random.default_rng(98).uniform(-1, 1, qk) * 1e-30),
        ("huge", np.random.default_rng(97).uniform(-1, 1, qk) * 3e38),
        ("max float", np.full(qk, 3.4028235e38)),
        ("f16 edge", np.random.default_rng(96).uniform(-1, 1, qk) * 70000.0),
        ("ramp", np.linspace(-1, 1, qk)),
    ]
    return [(n, np.asarray(a, dtype=np.float32)) for n, a in out]


def run(cmd, data):
    p = subprocess.run(cmd, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        sys.exit(f"quant_peer: {' '.join(cmd)}: exit {p.returncode}: {p.stderr.decode().strip()}")
    return p.stdout


def gguf_quant(t, x):
    from gguf import quants
    from gguf.constants import GGMLQuantizationType as T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if t == "F16":
            return x.astype(np.float16).tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return quants.quantize(x.reshape(1, -1), T[t]).tobytes()


def gguf_dequant(t, raw):
    from gguf import quants
    from gguf.constants import GGMLQuantizationType as T
    if t == "F16":
        return np.frombuffer(raw, dtype=np.float16).astype(np.float32).tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            a = np.frombuffer(raw, dtype=np.uint8).reshape(1, -1)
            return quants.dequantize(a, T[t]).astype(np.float32).tobytes()


def first_diff(a, b, unit):
    n = min(len(a), len(b))
    av = np.frombuffer(a[:n - n % unit], dtype=np.uint8).reshape(-1, unit)
    bv = np.frombuffer(b[:n - n % unit], dtype=np.uint8).reshape(-1, unit)
    bad = np.nonzero((av != bv).any(axis=1))[0]
    return int(bad[0]) if len(bad) else (None if len(a) == len(b) else n // unit)


def check_quant(t, cli, ref, seeds, plus_zero):
    blck, size = BLOCK[t]
    cs = cases(blck, seeds)
    if plus_zero:
        # gguf-py (numpy min/argmax) and ggml's C disagree on the sign of a zero
        # scale when a block holds -0.0; ggml is the truth (checked with --ref
        # ggml), so the gguf-py comparison feeds +0.0 only
        cs = [(n, a + np.float32(0)) for n, a in cs]
    x = np.concatenate([a for _, a in cs])
    ours = run([cli, "q", t], x.tobytes())
    theirs = ref(t, x)
    i = first_diff(ours, theirs, size)
    if i is not None:
        bounds = np.cumsum([len(a) // blck for _, a in cs])
        name = cs[int(np.searchsorted(bounds, i, side="right"))][0]
        print(f"not ok quantize {t}: block {i} ({name}) differs:\n"
              f"  ours   {ours[i * size:(i + 1) * size].hex()}\n"
              f"  theirs {theirs[i * size:(i + 1) * size].hex()}")
        return False
    print(f"ok quantize {t}: {len(ours) // size} blocks, {len(cs)} cases identical")
    return True


def check_dequant(t, cli, ref, seeds):
    blck, size = BLOCK[t]
    raw = np.random.default_rng(1234).integers(0, 256, size * 64 * seeds, dtype=np.uint8).tobytes()
    ours = run([cli, "deq", t], raw)
    theirs = ref(t, raw)
    a = np.frombuffer(ours, dtype=np.uint32)
    b = np.frombuffer(theirs, dtype=np.uint32)
    nan = lambda u: (u & 0x7FFFFFFF) > 0x7F800000
    same = (a == b) | (nan(a) & nan(b)) if len(a) == len(b) else np.array([False])
    if not same.all():
        i = int(np.nonzero(~same)[0][0]) if len(a) == len(b) else 0
        print(f"not ok dequantize {t}: element {i} (block {i // blck}) differs")
        return False
    print(f"ok dequantize {t}: {len(a)} values identical")
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", choices=["gguf", "ggml"], required=True)
    ap.add_argument("--peer", help="ggml-peer binary (--ref ggml)")
    ap.add_argument("--cli", default="build/t/tools/quant-cli")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--types", help="comma-separated subset")
    o = ap.parse_args()
    if o.ref == "gguf":
        qt, dt, qref, dref = GGUF_Q, GGUF_D, gguf_quant, gguf_dequant
    else:
        if not o.peer:
            ap.error("--ref ggml needs --peer")
        qt, dt = GGML_Q, GGML_D
        qref = lambda t, x: run([o.peer, "q", t], x.tobytes())
        dref = lambda t, raw: run([o.peer, "deq", t], raw)
    if o.types:
        want = o.types.split(",")
        qt = [t for t in qt if t in want]
        dt = [t for t in dt if t in want]
    ok = all([check_quant(t, o.cli, qref, o.seeds, o.ref == "gguf") for t in qt] +
             [check_dequant(t, o.cli, dref, o.seeds) for t in dt])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
