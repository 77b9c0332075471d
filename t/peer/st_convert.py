#!/usr/bin/env python3
"""st_convert.py CHECKPOINT DUMPDIR PLAN.tsv: check lib/safetensors' conversion plan
against an independent numpy reimplementation of llama.cpp's converter rules
(convert_hf_to_gguf.py / conversion/qwen.py, as formats.md section 3.3 states them).

DUMPDIR holds <gguf name>.f32 written by `st-dump CHECKPOINT DUMPDIR`; PLAN.tsv is
st-dump's stdout.  Every HF tensor must map to exactly one GGUF tensor with the
expected name and shape, and the values must match.  Prints one line per failure
and a closing count; exits 1 on any failure.
"""
import json, os, re, struct, sys
import numpy as np


def load_checkpoint(d):
    """name -> float32 array, read with the safetensors format spec (bf16 by hand)."""
    out = {}
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".safetensors"):
            continue
        raw = open(os.path.join(d, fn), "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n])
        base = 8 + n
        for k, v in hdr.items():
            if k == "__metadata__":
                continue
            b, e = v["data_offsets"]
            buf = raw[base + b:base + e]
            if v["dtype"] == "BF16":
                a = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
            elif v["dtype"] == "F8_E4M3":
                a = np.array([e4m3(b) for b in buf], np.float32)
            else:
                a = np.frombuffer(buf, {"F32": "<f4", "F16": "<f2"}[v["dtype"]]).astype(np.float32)
            out[k] = a.reshape(v["shape"])
    return out


def e4m3(b):
    s, e, m = b >> 7, (b >> 3) & 15, b & 7
    v = np.nan if b & 0x7f == 0x7f else (m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return -v if s else v


def fp8_scale(cfg, t):
    """FP8 weights times their <name>_scale_inv block scales; the scales themselves dropped."""
    bs = cfg.get("quantization_config", {}).get("weight_block_size", [128, 128])
    for k in [k for k in t if k.endswith("_scale_inv")]:
        w, s = t[k[:-len("_scale_inv")]], t.pop(k)
        full = np.repeat(np.repeat(s, bs[0], 0), bs[1], 1)[:w.shape[0], :w.shape[1]]
        t[k[:-len("_scale_inv")]] = (w * full).astype(np.float32)
    return t


def vreorder(w, nk, nv, hd, axis):
    """grouped V heads [k0v0..k0v(r-1), k1v0..] -> tiled [k0v0, k1v0, .., k0v1, ..] along axis."""
    r = nv // nk
    w = np.moveaxis(w, axis, 0)
    rest = w.shape[1:]
    w = w.reshape(nk, r, hd, *rest).swapaxes(0, 1).reshape(nk * r * hd, *rest)
    return np.moveaxis(w, 0, axis)


def llama_permute(w, n_head, n_kv):
    if n_kv is not None and n_head != n_kv:
        n_head = n_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def convert(cfg, t):
    hp = dict(cfg)
    hp.update(cfg.get("text_config", {}))
    mt = cfg["model_type"]
    n_layer = hp["num_hidden_layers"]
    out = {}
    qwen = mt in ("qwen3_5", "qwen3_5_text")
    for name, w in t.items():
        if name.startswith("model.language_model."):
            name = "model." + name[len("model.language_model."):]
        if name.startswith(("model.visual.", "visual.")) or name.endswith("rotary_emb.inv_freq"):
            continue
        m = re.match(r"(model|mtp)\.layers\.(\d+)\.(.*)$", name)
        if m:
            bid = int(m.group(2)) + (n_layer if m.group(1) == "mtp" else 0)
            rest = m.group(3)
        else:
            bid, rest = n_layer, name
        if qwen:
            nk, nv = hp["linear_num_key_heads"], hp["linear_num_value_heads"]
            hk, hv = hp["linear_key_head_dim"], hp["linear_value_head_dim"]
            kd = nk * hk
            if rest.endswith("A_log"):
                w = -np.exp(w)
            if rest.endswith("conv1d.weight"):
                w = w.squeeze()
            if nk != nv:
                if rest.endswith("in_proj_qkv.weight") or rest.endswith("conv1d.weight"):
                    w = np.concatenate([w[:2 * kd], vreorder(w[2 * kd:], nk, nv, hv, 0)])
                elif rest.endswith("in_proj_z.weight"):
                    w = vreorder(w, nk, nv, hv, 0)
                elif rest.endswith(("in_proj_b.weight", "in_proj_a.weight", "A_log", "dt_bias")):
                    w = vreorder(w, nk, nv, 1, 0)
                elif rest.endswith("out_proj.weight"):
                    w = vreorder(w, nk, nv, hv, 1)
        elif mt == "llama":
            nh, nkv = hp["num_attention_heads"], hp.get("num_key_value_heads")
            if rest.endswith("q_proj.weight"):
                w = llama_permute(w, nh, nh)
            elif rest.endswith("k_proj.weight"):
                w = llama_permute(w, nh, nkv)
        names = {
            "model.embed_tokens.weight": "token_embd.weight",
            "model.norm.weight": "output_norm.weight",
            "lm_head.weight": "output.weight",
            "mtp.fc.weight": f"blk.{bid}.nextn.eh_proj.weight",
            "mtp.pre_fc_norm_embedding.weight": f"blk.{bid}.nextn.enorm.weight",
            "mtp.pre_fc_norm_hidden.weight": f"blk.{bid}.nextn.hnorm.weight",
            "mtp.norm.weight": f"blk.{bid}.nextn.shared_head_norm.weight",
        }
        layer = {
            "input_layernorm.weight": "attn_norm.weight",
            "post_attention_layernorm.weight": "post_attention_norm.weight" if qwen else "ffn_norm.weight",
            "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
            "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
            "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
            "linear_attn.in_proj_qkv.weight": "attn_qkv.weight", "linear_attn.in_proj_z.weight": "attn_gate.weight",
            "linear_attn.in_proj_b.weight": "ssm_beta.weight", "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
            "linear_attn.out_proj.weight": "ssm_out.weight", "linear_attn.norm.weight": "ssm_norm.weight",
            "linear_attn.A_log": "ssm_a", "linear_attn.dt_bias": "ssm_dt.bias",
            "linear_attn.conv1d.weight": "ssm_conv1d.weight",
            "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
            "mlp.down_proj.weight": "ffn_down.weight",
        }
        g = names.get(name) or (f"blk.{bid}.{layer[rest]}" if m and rest in layer else None)
        if g is None:
            raise SystemExit(f"st_convert.py: no rule for {name}")
        # llama.cpp renames mtp.* to layer names first, so the rule "+1 on every *norm.weight but
        # linear_attn.norm" covers nextn.enorm / hnorm / shared_head_norm too (formats.md 3.3)
        if qwen and g.endswith("norm.weight") and not g.endswith("ssm_norm.weight"):
            w = w + np.float32(1)
        out[g] = w.astype(np.float32)
    return out


def main():
    ckpt, dump, plan = sys.argv[1:4]
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    want = convert(cfg, fp8_scale(cfg, load_checkpoint(ckpt)))
    fails = 0
    seen = set()
    for line in open(plan):
        f = line.rstrip("\n").split("\t")
        if f[0] != "tensor":
            continue
        name, nd, ne = f[1], int(f[2]), [int(x) for x in f[3:7]]
        seen.add(name)
        if name not in want:
            print(f"extra tensor {name}"); fails += 1; continue
        w = want[name]
        if list(reversed(w.shape)) != ne[:nd] or any(x != 1 for x in ne[nd:]):
            print(f"{name}: ne {ne[:nd]}, numpy shape reversed {list(reversed(w.shape))}"); fails += 1; continue
        got = np.fromfile(os.path.join(dump, name + ".f32"), "<f4").reshape(w.shape)
        if not np.allclose(got, w, rtol=2e-7, atol=0):
            bad = np.argwhere(~np.isclose(got, w, rtol=2e-7, atol=0))[0]
            print(f"{name}: value at {tuple(bad)} is {got[tuple(bad)]}, want {w[tuple(bad)]}"); fails += 1
    for name in sorted(set(want) - seen):
        print(f"missing tensor {name}"); fails += 1
    print(f"{len(want)} tensors, {fails} failures")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
