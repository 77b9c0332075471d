#!/usr/bin/env python3
"""make-nvfp4-fixtures.py [--ct-library] SRC OUTDIR [REFFILE]: NVFP4 safetensors checkpoints of
model A (SRC, an HF qwen35 dir) in the two published layouts, their malformed variants, and the
reference dequantization the C loader must reproduce bit for bit.

  OUTDIR/ct/   compressed-tensors "nvfp4-pack-quantized" (llm-compressor's NVFP4A16 output):
               <p>.weight_packed U8 [out, in/2], <p>.weight_scale F8_E4M3 [out, in/16],
               <p>.weight_global_scale F32 [1] (a divisor); config.json quantization_config
               with an ignore list: lm_head, re:.*embed.*, and layer 1's linear attention and
               layer 3's MLP (those stay BF16).  The MTP head is a separate
               model_mtp.safetensors, quantized too (mtp.fc stays BF16 by the ignore list).
               The values follow compressed-tensors 0.20.1's rule, written out below in numpy
               (generate_gparam, calculate_qparams, _quantize, cast_to_fp4, pack_fp4_to_uint8);
               with --ct-library they come from those functions themselves (needs torch and
               compressed-tensors): the cross-check, byte-identical files.
  OUTDIR/mo/   NVIDIA ModelOpt NVFP4: <p>.weight U8 [out, in/2], <p>.weight_scale F8_E4M3,
               <p>.weight_scale_2 F32 [] (a multiplier = amax/(6*448)), input_scale F32 [];
               hf_quant_config.json (producer modelopt, quant_algo NVFP4, exclude_modules).
               lm_head IS quantized here (the frspec trim then gathers NVFP4 rows); MTP
               tensors stay in the shards.  Written from ModelOpt's published rule (block
               scale = amax_block / (6 * scale_2) cast to E4M3, zero blocks 1.0): ModelOpt
               itself needs CUDA to run.
  OUTDIR/bad-*/  malformed variants (a missing block scale, a wrong block-scale shape, a
               missing global scale, a row not a multiple of 64, no quantization_config, an
               FP16 block scale), each a copy of ct/ or mo/ with one thing broken.
  REFFILE      (default OUTDIR/ref.tsv) one line per quantized tensor: HF module, the
               per-tensor multiplier s2 (CT: float32(1/global), ModelOpt: weight_scale_2) as
               hex bits, and the sha256 of the dequantized block values e2m1 * e4m3 (exact in
               float32) as float32 little-endian, row-major in the checkpoint's order, then
               the sha256 of fl32(that * s2).  Plus five sample values per tensor.

Deterministic: the same SRC gives the same bytes.  Needs numpy, ml_dtypes (bfloat16 and
float8_e4m3fn for numpy) and safetensors (its writer; shards are read here, as the numpy
frontend knows neither BF16 nor F8_E4M3).  Every float operation is float32, in the
library's order, so the rounding is the library's.
"""
import hashlib, json, os, shutil, struct, sys

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

F32 = np.float32
E4M3 = ml_dtypes.float8_e4m3fn
# code 8 (-0) as +0: ggml's table is integers, so a GGUF decodes it so (numerically equal)
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, 0.0, -0.5, -1, -1.5, -2, -3, -4, -6], F32)
DTYPES = {"BF16": ml_dtypes.bfloat16, "F16": np.float16, "F32": F32, "U8": np.uint8,
          "F8_E4M3": E4M3, "I64": np.int64, "I32": np.int32}


def read_st(path):
    """{name: ndarray} of a safetensors file (8-byte LE header length, JSON header, data)"""
    with open(path, "rb") as f:
        buf = f.read()
    n = struct.unpack("<Q", buf[:8])[0]
    hdr = json.loads(buf[8:8 + n])
    hdr.pop("__metadata__", None)
    t = {}
    for k, v in hdr.items():
        a, b = v["data_offsets"]
        dt = np.dtype(DTYPES[v["dtype"]])
        t[k] = np.frombuffer(buf, dt, (b - a) // dt.itemsize, 8 + n + a).reshape(v["shape"])
    return t


def write_st(t, path):
    # the writer reads the arrays' memory, so slices are copied (np.ascontiguousarray would
    # make the F32 [] scalars [1])
    save_file({k: v if v.flags.c_contiguous else v.copy() for k, v in t.items()}, path,
              metadata={"format": "pt"})


def to_e4m3(x):
    """float32 -> E4M3 (round to nearest even, as torch's .to(float8_e4m3fn)); NaN is a bug"""
    s = x.astype(E4M3)
    if np.isnan(s.astype(F32)).any():
        sys.exit("make-nvfp4-fixtures.py: a block scale overflows E4M3")
    return s


def fp4_codes(x):
    """E2M1 codes of x as compressed-tensors rounds: clamp to +-6, then cast_to_fp4's
    thresholds (ties: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4, i.e. to even),
    then pack_fp4_to_uint8's sign: the sign bit of sign(x)*|q|, so a negative x that rounds to
    0 is -0 (code 8) and a zero x is +0"""
    x = np.clip(x, F32(-6), F32(6))
    a = np.abs(x)
    m = np.zeros(a.shape, np.uint8)
    for lim, code, ge in ((0.25, 1, 0), (0.75, 2, 1), (1.25, 3, 0), (1.75, 4, 1), (2.5, 5, 0),
                          (3.5, 6, 1), (5.0, 7, 0)):
        m[a >= lim if ge else a > lim] = code
    return m | ((x < 0).astype(np.uint8) << 3)


def pack(codes):
    """element 2k in the low nibble of byte k, 2k+1 in the high one"""
    c = codes.reshape(codes.shape[0], -1, 2)
    return np.ascontiguousarray(c[..., 0] | (c[..., 1] << 4))


def ct_rule(w):
    """(packed u8 [out, in/2], scale E4M3 [out, in/16], global f32 [1]) of float32 weight w,
    by compressed-tensors 0.20.1's NVFP4A16 rule"""
    out, n = w.shape
    # generate_gparam(w.min(), w.max()): 448 * 6 / max(|min(lo, 0)|, max(hi, 0)), tiny-clamped;
    # a Python number over a tensor is torch's __rtruediv__: reciprocal() * number, two roundings
    amax = max(abs(min(w.min(), F32(0))), max(w.max(), F32(0)), np.finfo(F32).tiny)
    g = np.array([(F32(1) / F32(amax)) * F32(448.0 * 6.0)], F32)
    if not np.isfinite(g).all():
        g[:] = 1.0
    # calculate_qparams: (block amax / 6) * global, clamped to +-448, to E4M3, zeros -> 0.125
    grp = w.reshape(out, n // 16, 16)
    s = to_e4m3(np.clip((np.abs(grp).max(-1) / F32(6)) * g[0], F32(-448), F32(448)))
    s[s.astype(F32) == 0] = E4M3(0.125)
    # _quantize: x / (scale / global), then clamp and cast_to_fp4
    x = grp / (s.astype(F32) / g[0])[..., None]
    return pack(fp4_codes(x).reshape(out, n)), s, g


def ct_library(w):
    """ct_rule's triple by the compressed-tensors library itself (the cross-check)"""
    import torch
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
    from compressed_tensors.quantization import QuantizationScheme
    from compressed_tensors.quantization.quant_scheme import NVFP4A16
    from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam

    w = torch.from_numpy(w)
    out, n = w.shape
    scheme = QuantizationScheme(targets=["Linear"], **NVFP4A16)
    g = generate_gparam(w.min(), w.max())
    grp = w.reshape(out, n // 16, 16)
    scale, _ = calculate_qparams(grp.amin(-1), grp.amax(-1), scheme.weights, global_scale=g)
    sd = NVFP4PackedCompressor.compress({"weight": w, "weight_scale": scale,
                                          "weight_global_scale": g}, scheme)
    return (sd["weight_packed"].numpy(), sd["weight_scale"].view(torch.uint8).numpy().view(E4M3),
            g.reshape(1).float().numpy())


def mo_rule(w):
    """ModelOpt: (packed, scale E4M3, scale_2 f32 []) with scale_2 = amax / (6 * 448)"""
    out, n = w.shape
    s2 = np.array(np.abs(w).max() / F32(6.0 * 448.0), F32)
    grp = w.reshape(out, n // 16, 16)
    s = to_e4m3(np.abs(grp).max(-1) / (F32(6) * s2))
    s[s.astype(F32) == 0] = E4M3(1.0)
    x = grp / (s.astype(F32) * s2)[..., None]
    return pack(fp4_codes(x).reshape(out, n)), s, s2


def deq_blocks(packed, scale):
    """e2m1 * e4m3 per element, exact in float32 ([out, in])"""
    codes = np.stack([packed & 15, packed >> 4], -1).reshape(packed.shape[0], -1)
    sv = (scale.view(np.uint8) & 0x7F).view(E4M3).astype(F32)	# as llama.cpp keeps it (UE4M3)
    return (E2M1[codes] * np.repeat(sv, 16, axis=1)).astype(F32)


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def f32hex(v):
    return "%08x" % struct.unpack("<I", struct.pack("<f", v))[0]


QLIN = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
        "in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b", "out_proj", "fc")


def quantizable(name):
    return name.endswith(".weight") and name.split(".")[-2] in QLIN or name == "lm_head.weight"


def ct_ignored(mod):
    return mod == "lm_head" or "embed" in mod or mod == "mtp.fc" or \
        mod.startswith("model.layers.1.linear_attn.") or mod.startswith("model.layers.3.mlp.")


CT_IGNORE = ["lm_head", "re:.*embed.*", "mtp.fc", "re:model\\.layers\\.1\\.linear_attn\\..*",
             "re:model\\.layers\\.3\\.mlp\\..*"]


def load(src):
    t = {}
    for f in sorted(os.listdir(src)):
        if f.endswith(".safetensors"):
            t.update(read_st(os.path.join(src, f)))
    return t


def copy_side(src, dst):
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))


def ct_config(ignore):
    """config.json's quantization_config as compressed-tensors 0.20.1 writes it for NVFP4
    weights (modules matching ignore left out)"""
    args = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
            "symmetric": True, "dynamic": False, "scale_dtype": "torch.float8_e4m3fn",
            "zp_dtype": "torch.float8_e4m3fn", "observer": "memoryless_minmax",
            "actorder": None, "block_structure": None, "observer_kwargs": {}}
    return {
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
        "quantization_status": "compressed", "version": "0.20.1", "global_compression_ratio": None,
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": args,
                                      "input_activations": None, "output_activations": None,
                                      "format": "nvfp4-pack-quantized"}},
        "ignore": ignore, "kv_cache_scheme": None, "sparsity_config": {},
        "transform_config": {}}


def write_ct(src, t, out, ref, quant):
    d = os.path.join(out, "ct")
    os.makedirs(d, exist_ok=True)
    trunk, mtp = {}, {}
    for k, v in t.items():
        mod = k[:-len(".weight")]
        dst = mtp if k.startswith("mtp.") else trunk
        if not quantizable(k) or ct_ignored(mod):
            dst[k] = v
            continue
        p, s, g = quant(v.astype(F32))
        dst[mod + ".weight_packed"], dst[mod + ".weight_scale"] = p, s
        dst[mod + ".weight_global_scale"] = g
        reference(ref, "ct", mod, p, s, F32(1) / g[0])
    write_st(trunk, os.path.join(d, "model.safetensors"))
    write_st(mtp, os.path.join(d, "model_mtp.safetensors"))
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["quantization_config"] = ct_config(CT_IGNORE)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    copy_side(src, d)
    return d


def write_mo(src, t, out, ref):
    d = os.path.join(out, "mo")
    os.makedirs(d, exist_ok=True)
    o = {}
    for k, v in t.items():
        mod = k[:-len(".weight")]
        if not quantizable(k) or "embed" in mod:
            o[k] = v
            continue
        p, s, s2 = mo_rule(v.astype(F32))
        o[mod + ".weight"], o[mod + ".weight_scale"], o[mod + ".weight_scale_2"] = p, s, s2
        o[mod + ".input_scale"] = np.array(1.0 / (6 * 448), F32)
        reference(ref, "mo", mod, p, s, s2)
    names = sorted(o)
    half = len(names) // 2
    idx = {"metadata": {"total_size": 0}, "weight_map": {}}
    for i, part in enumerate((names[:half], names[half:])):
        fn = "model-%05d-of-00002.safetensors" % (i + 1)
        write_st({k: o[k] for k in part}, os.path.join(d, fn))
        idx["weight_map"].update({k: fn for k in part})
    json.dump(idx, open(os.path.join(d, "model.safetensors.index.json"), "w"), indent=1)
    json.dump(json.load(open(os.path.join(src, "config.json"))), open(os.path.join(d, "config.json"), "w"),
              indent=1)
    json.dump({"producer": {"name": "modelopt", "version": "0.39.0"},
               "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                                "exclude_modules": ["model.embed_tokens", "mtp.embed*"]}},
              open(os.path.join(d, "hf_quant_config.json"), "w"), indent=1)
    copy_side(src, d)
    return d


def reference(ref, layout, mod, p, s, s2):
    v = deq_blocks(p, s)
    full = (v * F32(s2)).astype(F32)
    flat = v.reshape(-1)
    pick = [0, 1, 17, flat.size // 2, flat.size - 1]
    ref.write("%s\t%s\t%s\t%s\t%s\t%s\n" % (layout, mod, f32hex(float(s2)), sha(v), sha(full),
              " ".join(f32hex(float(flat[i])) for i in pick)))


def variant(out, base, name, edit):
    d = os.path.join(out, "bad-" + name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(out, base), d)
    edit(d)


def retensor(d, fn, f):
    path = os.path.join(d, fn)
    t = read_st(path)
    f(t)
    write_st(t, path)


def bad_variants(out):
    m = "model.layers.0.mlp.gate_proj."
    fn = "model.safetensors"
    variant(out, "ct", "noscale", lambda d: retensor(d, fn, lambda t: t.pop(m + "weight_scale")))
    variant(out, "ct", "noglobal", lambda d: retensor(d, fn, lambda t: t.pop(m + "weight_global_scale")))
    variant(out, "ct", "scaleshape", lambda d: retensor(
        d, fn, lambda t: t.__setitem__(m + "weight_scale", t[m + "weight_scale"][:, :-1])))
    variant(out, "ct", "scaledtype", lambda d: retensor(
        d, fn, lambda t: t.__setitem__(m + "weight_scale", t[m + "weight_scale"].astype(np.float16))))

    def noconfig(d):
        c = json.load(open(os.path.join(d, "config.json")))
        del c["quantization_config"]
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
    variant(out, "ct", "noconfig", noconfig)

    def row48(t):	# 384 -> 336 values a row: not a multiple of 64, still of 16
        t[m + "weight_packed"] = t[m + "weight_packed"][:, :168]
        t[m + "weight_scale"] = t[m + "weight_scale"][:, :21]
    variant(out, "ct", "row", lambda d: retensor(d, fn, row48))

    def mo_noscale2(d):
        idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
        k = m + "weight_scale_2"
        f = idx["weight_map"].pop(k)
        retensor(d, f, lambda t: t.pop(k))
        json.dump(idx, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    variant(out, "mo", "noscale2", mo_noscale2)


def main():
    args = sys.argv[1:]
    lib = args[:1] == ["--ct-library"]
    args = args[1:] if lib else args
    if len(args) not in (2, 3):
        print("usage: make-nvfp4-fixtures.py [--ct-library] SRC OUTDIR [REFFILE]", file=sys.stderr)
        sys.exit(2)
    src, out = args[0], args[1]
    os.makedirs(out, exist_ok=True)
    reff = args[2] if len(args) > 2 else os.path.join(out, "ref.tsv")
    t = load(src)
    with open(reff, "w") as ref:
        ref.write("# layout\tmodule\ts2\tsha256(e2m1*e4m3)\tsha256(fl32(that*s2))\tsamples\n")
        write_ct(src, t, out, ref, ct_library if lib else ct_rule)
        write_mo(src, t, out, ref)
    bad_variants(out)


if __name__ == "__main__":
    main()
