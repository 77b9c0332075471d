#!/usr/bin/env python3
"""Write the tiny GGUF fixtures in t/data/ with llama.cpp's own gguf-py writer.

  tiny.gguf     every kv value type (arrays of each, strings included), tensors
                of types F32, F16, BF16, Q8_0, Q4_0 and I32
  align64.gguf  the same tensors with general.alignment = 64
  v2.gguf       tiny.gguf with the version field set to 2 (v2 parses as v3)
  nan.gguf      F32 and F16 tensors holding NaN and Inf, for --check

Usage: tools/make-gguf-fixtures.py [OUTDIR]   (default t/data)
Deterministic: running it again rewrites the same bytes.
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGUFValueType as V, GGMLQuantizationType as Q
from gguf.quants import quantize


def add_all_kv(w):
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.5)
    w.add_bool("test.bool", True)
    w.add_string("test.str", "héllo \"world\"\n")
    w.add_uint64("test.u64", 18000000000000000000)
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", -2.25)
    w.add_string("test.empty", "")
    for name, t, vals in [
        ("u8", V.UINT8, [1, 2, 255]), ("i8", V.INT8, [-1, 2, -128]),
        ("u16", V.UINT16, [1, 65535]), ("i16", V.INT16, [-2, 300]),
        ("u32", V.UINT32, [7, 4294967295]), ("i32", V.INT32, list(range(-3, 97))),
        ("f32", V.FLOAT32, [1.5, -0.25]), ("bool", V.BOOL, [True, False, True]),
        ("u64", V.UINT64, [1, 2**64 - 1]), ("i64", V.INT64, [-2**63, 5]),
        ("f64", V.FLOAT64, [0.125, 1e300]),
        ("str", V.STRING, ["a", "", "tab\there", "ünï", "<|im_end|>"]),
    ]:
        w.add_key_value("test.arr." + name, vals, V.ARRAY, sub_type=t)


def add_tensors(w):
    w.add_tensor("tok_embd.weight", (np.arange(12, dtype=np.float32) / 4 - 1).reshape(3, 4))
    w.add_tensor("norm.weight", np.linspace(-2, 2, 8).astype(np.float16))
    bf = (np.array([1, -1, 0.5, 2, 3, -4, 0.25, 8], dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    w.add_tensor("blk.0.bf16", bf.view(np.uint8).reshape(2, 8), raw_dtype=Q.BF16)
    x = np.sin(np.arange(64, dtype=np.float32)).reshape(2, 32)
    w.add_tensor("blk.0.q8_0", quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("blk.0.q4_0", quantize(x, Q.Q4_0), raw_dtype=Q.Q4_0)
    w.add_tensor("ids", np.array([3, 1, 4, 1, 5], dtype=np.int32))


def write(path, arch, body, alignment=None):
    w = gguf.GGUFWriter(path, arch)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    body(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "t/data"
    os.makedirs(out, exist_ok=True)
    tiny = os.path.join(out, "tiny.gguf")
    write(tiny, "tiny", lambda w: (add_all_kv(w), add_tensors(w)))
    write(os.path.join(out, "align64.gguf"), "tiny", add_tensors, alignment=64)
    with open(tiny, "rb") as f:
        b = bytearray(f.read())
    b[4:8] = (2).to_bytes(4, "little")
    with open(os.path.join(out, "v2.gguf"), "wb") as f:
        f.write(b)

    def nan(w):
        w.add_tensor("bad.f32", np.array([1, np.nan, -np.inf, 2], dtype=np.float32))
        w.add_tensor("bad.f16", np.array([0, np.inf, 1, 1, 1, 1, 1, 1], dtype=np.float16))
        w.add_tensor("good", np.array([1, 2, 3, 4], dtype=np.float32))
    write(os.path.join(out, "nan.gguf"), "tiny", nan)


if __name__ == "__main__":
    main()
