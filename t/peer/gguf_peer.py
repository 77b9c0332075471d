#!/usr/bin/env python3
"""Cross-check lib/gguf against llama.cpp's own gguf-py (PyPI `gguf`).

  gguf_peer.py fresh OUT.gguf        write a new file with gguf-py's GGUFWriter:
                                     every value type, tensors of several types
  gguf_peer.py compare FILE          gguf-inspect --json FILE must report what
                                     gguf-py's GGUFReader reads: every kv (type
                                     and value), every tensor (type, shape,
                                     offset, bytes), the alignment and data offset
  gguf_peer.py same A B              gguf-py reads A and B with the same metadata
                                     and the same tensor bytes
  gguf_peer.py stats FILE [N]        gguf-inspect --json --stats agrees with
                                     gguf-py's dequantize on the first N tensors

Exits 0 when they agree, 1 with the first difference on stderr.
"""
import json
import subprocess
import sys

import numpy as np
import gguf
from gguf import GGUFReader, GGUFValueType as V, GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

NAMES = {V.UINT8: "uint8", V.INT8: "int8", V.UINT16: "uint16", V.INT16: "int16",
         V.UINT32: "uint32", V.INT32: "int32", V.FLOAT32: "float32", V.BOOL: "bool",
         V.STRING: "string", V.ARRAY: "array", V.UINT64: "uint64", V.INT64: "int64",
         V.FLOAT64: "float64"}


def fail(msg):
    print("gguf_peer: " + msg, file=sys.stderr)
    sys.exit(1)


def fresh(path):
    rng = np.random.default_rng(20261130)
    w = gguf.GGUFWriter(path, "peer")
    w.add_uint32("peer.n", 7)
    w.add_int8("peer.i8", -1)
    w.add_uint16("peer.u16", 513)
    w.add_int16("peer.i16", -513)
    w.add_uint8("peer.u8", 9)
    w.add_int32("peer.i32", -123456)
    w.add_uint64("peer.u64", 2**63 + 5)
    w.add_int64("peer.i64", -(2**62))
    w.add_float32("peer.f32", 1 / 3)
    w.add_float64("peer.f64", 1 / 3)
    w.add_bool("peer.no", False)
    w.add_string("peer.s", "multi\nline \u2603 \U0001F600")
    w.add_key_value("peer.toks", ["<s>", "</s>", " the", "\u00e9t\u00e9"] * 20, V.ARRAY, sub_type=V.STRING)
    w.add_key_value("peer.scores", [float(x) for x in rng.standard_normal(50)], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("peer.u64s", [1, 2**64 - 1, 3], V.ARRAY, sub_type=V.UINT64)
    x = rng.standard_normal((8, 256)).astype(np.float32)
    w.add_tensor("a.f32", x[:3, :7])
    w.add_tensor("b.f16", x[0].astype(np.float16))
    for t in (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.BF16):	# those gguf-py can quantize
        w.add_tensor("c." + t.name.lower(), quantize(x, t), raw_dtype=t)
    w.add_tensor("d.3d", x.reshape(2, 4, 256)[:, :, :5].copy())
    w.add_tensor("e.i64", np.arange(5, dtype=np.int64))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def value(f):
    t = f.types[0]
    if t == V.ARRAY:
        return f.contents()
    v = f.contents()
    return bool(v) if t == V.BOOL else v


def inspect_json(path, *extra):
    r = subprocess.run(["gguf-inspect", "--json", *extra, path], capture_output=True, text=True)
    if r.returncode not in (0, 1) or not r.stdout:
        fail("gguf-inspect failed: " + r.stderr.strip())
    return json.loads(r.stdout)


def same_value(f, ours, theirs):
    """float32 values compare as float32: our JSON holds their shortest text"""
    if f.types[-1] == V.FLOAT32:
        return np.array_equal(np.array(ours, dtype=np.float64).astype(np.float32),
                              np.array(theirs, dtype=np.float64).astype(np.float32))
    return ours == theirs


def compare(path):
    r = GGUFReader(path)
    d = inspect_json(path)
    fields = [(k, f) for k, f in r.fields.items() if not k.startswith("GGUF.")]
    if list(d["metadata"]) != [k for k, _ in fields]:
        fail("key order differs")
    for k, f in fields:
        m = d["metadata"][k]
        if m["type"] != NAMES[f.types[0]]:
            fail(f"{k}: type {m['type']}, gguf-py {NAMES[f.types[0]]}")
        if f.types[0] == V.ARRAY and m["element_type"] != NAMES[f.types[-1]]:
            fail(f"{k}: element type {m['element_type']}, gguf-py {NAMES[f.types[-1]]}")
        if not same_value(f, m["value"], value(f)):
            fail(f"{k}: value differs")
    if len(d["tensors"]) != len(r.tensors):
        fail("tensor count differs")
    for ours, t in zip(d["tensors"], r.tensors):
        want = (t.name, t.tensor_type.name, [int(x) for x in t.shape], int(t.n_bytes), int(t.data_offset))
        got = (ours["name"], ours["type"], ours["shape"], ours["bytes"], ours["file_offset"])
        if got != want:
            fail(f"tensor {t.name}: {got}, gguf-py {want}")
    if d["alignment"] != r.alignment or d["data_offset"] != r.data_offset:
        fail("alignment or data offset differs")
    print(f"{path}: {len(fields)} kvs, {len(r.tensors)} tensors agree with gguf-py")


def same(a, b):
    ra, rb = GGUFReader(a), GGUFReader(b)
    fa = [(k, f.types, value(f)) for k, f in ra.fields.items() if not k.startswith("GGUF.")]
    fb = [(k, f.types, value(f)) for k, f in rb.fields.items() if not k.startswith("GGUF.")]
    if fa != fb:
        fail("metadata differs")
    for x, y in zip(ra.tensors, rb.tensors, strict=True):
        if (x.name, x.tensor_type, list(x.shape)) != (y.name, y.tensor_type, list(y.shape)):
            fail(f"tensor {x.name}: info differs")
        if x.data.tobytes() != y.data.tobytes():
            fail(f"tensor {x.name}: bytes differ")
    print(f"{b}: same metadata and tensor bytes as {a} in gguf-py")


def stats(path, n):
    r = GGUFReader(path)
    d = inspect_json(path, "--stats")["check"]["tensors"]
    for ours, t in list(zip(d, r.tensors))[:n]:
        if t.tensor_type in (Q.I8, Q.I16, Q.I32, Q.I64, Q.F64):
            x = np.asarray(t.data).astype(np.float64).ravel()
        else:
            x = dequantize(t.data, t.tensor_type).astype(np.float64).ravel()
        want = (x.min(), x.max(), x.mean(), np.sqrt((x * x).mean()))
        got = (ours["min"], ours["max"], ours["mean"], ours["rms"])
        if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
            fail(f"tensor {t.name}: stats {got}, gguf-py {want}")
    print(f"{path}: stats of {min(n, len(d))} tensors agree with gguf-py")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "fresh":
        fresh(args[0])
    elif cmd == "compare":
        compare(args[0])
    elif cmd == "same":
        same(args[0], args[1])
    elif cmd == "stats":
        stats(args[0], int(args[1]) if len(args) > 1 else 1 << 30)
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
