#!/usr/bin/env python3
"""make-nvfp4-fixtures.py SRC OUTDIR [REFFILE]: NVFP4 safetensors checkpoints of model A (SRC,
an HF qwen35 dir) in the two published layouts, their malformed variants, and the reference
dequantization the C loader must reproduce bit for bit.

  OUTDIR/ct/   compressed-tensors "nvfp4-pack-quantized" (llm-compressor's NVFP4A16 output):
               <p>.weight_packed U8 [out, in/2], <p>.weight_scale F8_E4M3 [out, in/16],
               <p>.weight_global_scale F32 [1] (a divisor); config.json quantization_config
               with an ignore list: lm_head, re:.*embed.*, and layer 1's linear attention and
               layer 3's MLP (those stay BF16).  The MTP head is a separate
               model_mtp.safetensors, quantized too (mtp.fc stays BF16 by the ignore list).
               The values come from the compressed-tensors library when it imports
               (generate_gparam, calculate_qparams, NVFP4PackedCompressor.compress), else
               from the same rule written out here; the script prints which.
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

Deterministic: the same SRC gives the same bytes.  Needs numpy, torch, safetensors.
"""
import hashlib, json, os, shutil, struct, sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file

# code 8 (-0) as +0: ggml's table is integers, so a GGUF decodes it so (numerically equal)
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, 0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)

try:
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
    from compressed_tensors.quantization import QuantizationScheme
    from compressed_tensors.quantization.quant_scheme import NVFP4A16
    from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam
    CT = True
except Exception:  # noqa: BLE001 - any import failure means: use the written-out rule
    CT = False


def ct_quant(w):
    """(packed u8 [out, in/2], scale f8 [out, in/16], global f32 [1]) of bf16 weight w."""
    w = w.float()
    out, n = w.shape
    if CT:
        scheme = QuantizationScheme(targets=["Linear"], **NVFP4A16)
        g = generate_gparam(w.min(), w.max())
        grp = w.reshape(out, n // 16, 16)
        scale, _ = calculate_qparams(grp.amin(-1), grp.amax(-1), scheme.weights, global_scale=g)
        sd = NVFP4PackedCompressor.compress({"weight": w, "weight_scale": scale,
                                              "weight_global_scale": g}, scheme)
        return sd["weight_packed"], sd["weight_scale"], g.reshape(1).float()
    g = torch.tensor([448.0 * 6.0], dtype=torch.float32) / w.abs().max().clamp(min=1e-30)
    grp = w.reshape(out, n // 16, 16)
    s = (grp.abs().amax(-1) / 6.0 * g).to(torch.float8_e4m3fn)
    s = torch.where(s.float() == 0, torch.tensor(0.125).to(torch.float8_e4m3fn), s)
    x = grp / (s.float() / g).unsqueeze(-1)
    return pack(fp4_codes(x).reshape(out, n)), s, g


def fp4_codes(x):
    """round to E2M1 as compressed-tensors' cast_to_fp4 does (ties as it breaks them)"""
    a = x.abs()
    m = torch.zeros_like(a, dtype=torch.uint8)
    for lim, code, ge in ((0.25, 1, 0), (0.75, 2, 1), (1.25, 3, 0), (1.75, 4, 1), (2.5, 5, 0),
                          (3.5, 6, 1), (5.0, 7, 0)):
        m = torch.where(a >= lim if ge else a > lim, torch.tensor(code, dtype=torch.uint8), m)
    return m | ((x < 0).to(torch.uint8) << 3)


def pack(codes):
    c = codes.reshape(codes.shape[0], -1, 2)
    return (c[..., 0] | (c[..., 1] << 4)).contiguous()


def mo_quant(w):
    """ModelOpt: (packed, scale f8, scale_2 f32 []) with scale_2 = amax / (6 * 448)."""
    w = w.float()
    out, n = w.shape
    s2 = (w.abs().max() / (6.0 * 448.0)).reshape(()).float()
    grp = w.reshape(out, n // 16, 16)
    s = (grp.abs().amax(-1) / (6.0 * s2)).to(torch.float8_e4m3fn)
    s = torch.where(s.float() == 0, torch.tensor(1.0).to(torch.float8_e4m3fn), s)
    x = grp / (s.float() * s2).unsqueeze(-1)
    return pack(fp4_codes(x).reshape(out, n)), s, s2


def deq_blocks(packed, scale):
    """e2m1 * e4m3 per element, exact in float32 ([out, in])"""
    p = packed.numpy()
    codes = np.stack([p & 15, p >> 4], -1).reshape(p.shape[0], -1)
    sb = scale.view(torch.uint8).numpy() & 0x7F	# as llama.cpp keeps it (UE4M3)
    sv = torch.from_numpy(sb.copy()).view(torch.float8_e4m3fn).float().numpy()
    return (E2M1[codes] * np.repeat(sv, 16, axis=1)).astype(np.float32)


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
            t.update(load_file(os.path.join(src, f)))
    return t


def copy_side(src, dst):
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))


def write_ct(src, t, out, ref):
    d = os.path.join(out, "ct")
    os.makedirs(d, exist_ok=True)
    trunk, mtp = {}, {}
    for k, v in t.items():
        mod = k[:-len(".weight")]
        dst = mtp if k.startswith("mtp.") else trunk
        if not quantizable(k) or ct_ignored(mod):
            dst[k] = v
            continue
        p, s, g = ct_quant(v)
        dst[mod + ".weight_packed"], dst[mod + ".weight_scale"] = p, s
        dst[mod + ".weight_global_scale"] = g
        s2 = float(np.float32(1.0) / np.float32(g.item()))
        reference(ref, "ct", mod, p, s, s2)
    save_file(trunk, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    save_file(mtp, os.path.join(d, "model_mtp.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(src, "config.json")))
    args = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
            "symmetric": True, "dynamic": False, "scale_dtype": "torch.float8_e4m3fn",
            "zp_dtype": "torch.float8_e4m3fn", "observer": "memoryless_minmax",
            "actorder": None, "block_structure": None, "observer_kwargs": {}}
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
        "quantization_status": "compressed", "version": "0.20.1", "global_compression_ratio": None,
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": args,
                                      "input_activations": None, "output_activations": None,
                                      "format": "nvfp4-pack-quantized"}},
        "ignore": CT_IGNORE, "kv_cache_scheme": None, "sparsity_config": {},
        "transform_config": {}}
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
        p, s, s2 = mo_quant(v)
        o[mod + ".weight"], o[mod + ".weight_scale"], o[mod + ".weight_scale_2"] = p, s, s2
        o[mod + ".input_scale"] = torch.tensor(1.0 / (6 * 448), dtype=torch.float32).reshape(())
        reference(ref, "mo", mod, p, s, float(s2))
    names = sorted(o)
    half = len(names) // 2
    idx = {"metadata": {"total_size": 0}, "weight_map": {}}
    for i, part in enumerate((names[:half], names[half:])):
        fn = "model-%05d-of-00002.safetensors" % (i + 1)
        save_file({k: o[k] for k in part}, os.path.join(d, fn), metadata={"format": "pt"})
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
    full = (v * np.float32(s2)).astype(np.float32)
    flat = v.reshape(-1)
    pick = [0, 1, 17, flat.size // 2, flat.size - 1]
    ref.write("%s\t%s\t%s\t%s\t%s\t%s\n" % (layout, mod, f32hex(s2), sha(v), sha(full),
              " ".join(f32hex(float(flat[i])) for i in pick)))


def variant(out, base, name, edit):
    d = os.path.join(out, "bad-" + name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(out, base), d)
    edit(d)


def retensor(d, fn, f):
    path = os.path.join(d, fn)
    t = load_file(path)
    f(t)
    save_file(t, path, metadata={"format": "pt"})


def bad_variants(out):
    m = "model.layers.0.mlp.gate_proj."
    fn = "model.safetensors"
    variant(out, "ct", "noscale", lambda d: retensor(d, fn, lambda t: t.pop(m + "weight_scale")))
    variant(out, "ct", "noglobal", lambda d: retensor(d, fn, lambda t: t.pop(m + "weight_global_scale")))
    variant(out, "ct", "scaleshape", lambda d: retensor(
        d, fn, lambda t: t.__setitem__(m + "weight_scale", t[m + "weight_scale"][:, :-1].contiguous())))
    variant(out, "ct", "scaledtype", lambda d: retensor(
        d, fn, lambda t: t.__setitem__(m + "weight_scale", t[m + "weight_scale"].half())))

    def noconfig(d):
        c = json.load(open(os.path.join(d, "config.json")))
        del c["quantization_config"]
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
    variant(out, "ct", "noconfig", noconfig)

    def row48(t):	# 384 -> 336 values a row: not a multiple of 64, still of 16
        t[m + "weight_packed"] = t[m + "weight_packed"][:, :168].contiguous()
        t[m + "weight_scale"] = t[m + "weight_scale"][:, :21].contiguous()
    variant(out, "ct", "row", lambda d: retensor(d, fn, row48))

    def mo_noscale2(d):
        idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
        k = m + "weight_scale_2"
        f = idx["weight_map"].pop(k)
        retensor(d, f, lambda t: t.pop(k))
        json.dump(idx, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    variant(out, "mo", "noscale2", mo_noscale2)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: make-nvfp4-fixtures.py SRC OUTDIR [REFFILE]")
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    reff = sys.argv[3] if len(sys.argv) > 3 else os.path.join(out, "ref.tsv")
    t = load(src)
    with open(reff, "w") as ref:
        ref.write("# layout\tmodule\ts2\tsha256(e2m1*e4m3)\tsha256(fl32(that*s2))\tsamples\n")
        write_ct(src, t, out, ref)
        write_mo(src, t, out, ref)
    bad_variants(out)
    print("ct layout: %s" % ("compressed-tensors library" if CT else "written-out rule"),
          file=sys.stderr)


if __name__ == "__main__":
    main()
