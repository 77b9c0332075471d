#!/usr/bin/env python3
"""make-st-fixtures.py [OUTDIR]: the tiny safetensors checkpoints lib/safetensors' tests read
(default t/data/st/).  Values are deterministic (arange-based), so tests can check exact
numbers.  Uses the `safetensors` PyPI package; BF16 (which numpy lacks) is written by hand
per the format: 8-byte little-endian header length, JSON header, data.

  llama/          llama, 2 layers, GQA (4 heads, 2 kv), one model.safetensors (F32), tied
                  embeddings, and a byte-level BPE tokenizer (llama3 regex, trained here with the
                  `tokenizers` package on a fixed text) with special, look-special and user-defined
                  added tokens, and ids past the tokenizer's end (vocab_size 300)
  qwen35/         released layout: model_type qwen3_5 + text_config, model.language_model.*,
                  model.visual.* (skipped), 2 shards + index, and an unlisted mtp.safetensors;
                  4 key heads / 8 value heads so the V-head reorder shows; F16
  fp8/            llama as above with its projections in F8_E4M3 plus F32 `<name>_scale_inv`
                  block scales (quantization_config weight_block_size [8, 12]: ragged blocks),
                  written by hand; the tokenizer is llama/'s
  bf16.safetensors  one BF16 tensor and __metadata__, written by hand
  t/fuzz/safetensors/  seeds for the fuzz target
"""
import json, os, struct, sys
import numpy as np
from safetensors.numpy import save_file

out = sys.argv[1] if len(sys.argv) > 1 else "t/data/st"
fuzz = "t/fuzz/safetensors"


def arange(shape, seed, dtype=np.float32):
    n = int(np.prod(shape))
    return ((np.arange(n) % 97 + seed) / 64.0 - 0.5).astype(dtype).reshape(shape)


def llama():
    d = os.path.join(out, "llama")
    os.makedirs(d, exist_ok=True)
    E, F, H, KV, V, L = 16, 32, 4, 2, 300, 2
    hd = E // H
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": E,
           "intermediate_size": F, "num_attention_heads": H, "num_key_value_heads": KV,
           "num_hidden_layers": L, "vocab_size": V, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
           "max_position_embeddings": 128, "tie_word_embeddings": True}
    t = {"model.embed_tokens.weight": arange((V, E), 1), "model.norm.weight": arange((E,), 2)}
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = arange((E,), 3 + i)
        t[p + "post_attention_layernorm.weight"] = arange((E,), 5 + i)
        t[p + "self_attn.q_proj.weight"] = arange((H * hd, E), 7 + i)
        t[p + "self_attn.k_proj.weight"] = arange((KV * hd, E), 9 + i)
        t[p + "self_attn.v_proj.weight"] = arange((KV * hd, E), 11 + i)
        t[p + "self_attn.o_proj.weight"] = arange((E, H * hd), 13 + i)
        t[p + "mlp.gate_proj.weight"] = arange((F, E), 15 + i)
        t[p + "mlp.up_proj.weight"] = arange((F, E), 17 + i)
        t[p + "mlp.down_proj.weight"] = arange((E, F), 19 + i)
        t[p + "self_attn.rotary_emb.inv_freq"] = arange((hd // 2,), 0)
    save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    tokenizer(d)


LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")


def tokenizer(d):
    from tokenizers import Tokenizer, Regex, AddedToken, models, pre_tokenizers, decoders, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    text = ["the quick brown fox jumps over the lazy dog; it's 1234 o'clock\n" * 3,
            "def main():\n    return 0  # hello world\n"]
    tr = trainers.BpeTrainer(vocab_size=280, min_frequency=2, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text, tr)
    tok.add_special_tokens(["<|begin_of_text|>", "<|eot|>"])
    tok.add_tokens([AddedToken("<|looks|>", special=False, normalized=False),
                    AddedToken("\u2581user\u2581tok", special=False, normalized=False)])
    tok.save(os.path.join(d, "tokenizer.json"))
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": True, "add_eos_token": False,
               "bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|eot|>"}, "pad_token": None,
               "chat_template": [{"name": "default", "template": "{{ messages[0]['content'] }}"},
                                 {"name": "tool_use", "template": "tools"}]},
              open(os.path.join(d, "tokenizer_config.json"), "w"), indent=1)


def qwen35():
    d = os.path.join(out, "qwen35")
    os.makedirs(d, exist_ok=True)
    E, F, H, KV, hd, V, L = 16, 32, 2, 1, 8, 24, 4
    nk, nv, hk, hv, K = 2, 4, 4, 4, 4
    conv = 2 * nk * hk + nv * hv
    tc = {"model_type": "qwen3_5_text", "hidden_size": E, "intermediate_size": F,
          "num_attention_heads": H, "num_key_value_heads": KV, "head_dim": hd, "num_hidden_layers": L,
          "vocab_size": V, "rms_norm_eps": 1e-6, "max_position_embeddings": 256,
          "linear_num_key_heads": nk, "linear_num_value_heads": nv, "linear_key_head_dim": hk,
          "linear_value_head_dim": hv, "linear_conv_kernel_dim": K, "full_attention_interval": 2,
          "layer_types": ["linear_attention", "full_attention"] * 2, "mtp_num_hidden_layers": 1,
          "rope_parameters": {"rope_theta": 1e7, "partial_rotary_factor": 0.5,
                              "mrope_section": [1, 1, 0], "rope_type": "default"}}
    cfg = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
           "text_config": tc, "vision_config": {"depth": 1}}
    f16 = np.float16
    m = "model.language_model."
    a = {m + "embed_tokens.weight": arange((V, E), 1, f16), m + "norm.weight": arange((E,), 2, f16),
         "lm_head.weight": arange((V, E), 3, f16), "model.visual.patch_embed.weight": arange((4, 4), 0, f16)}
    b = {}
    for i in range(L):
        p = f"{m}layers.{i}."
        s = a if i < 2 else b
        s[p + "input_layernorm.weight"] = arange((E,), 4 + i, f16)
        s[p + "post_attention_layernorm.weight"] = arange((E,), 6 + i, f16)
        s[p + "mlp.gate_proj.weight"] = arange((F, E), 8 + i, f16)
        s[p + "mlp.up_proj.weight"] = arange((F, E), 10 + i, f16)
        s[p + "mlp.down_proj.weight"] = arange((E, F), 12 + i, f16)
        if i % 2 == 1:
            s[p + "self_attn.q_proj.weight"] = arange((2 * H * hd, E), 14 + i, f16)
            s[p + "self_attn.k_proj.weight"] = arange((KV * hd, E), 16 + i, f16)
            s[p + "self_attn.v_proj.weight"] = arange((KV * hd, E), 18 + i, f16)
            s[p + "self_attn.o_proj.weight"] = arange((E, H * hd), 20 + i, f16)
            s[p + "self_attn.q_norm.weight"] = arange((hd,), 22 + i, f16)
            s[p + "self_attn.k_norm.weight"] = arange((hd,), 24 + i, f16)
        else:
            s[p + "linear_attn.in_proj_qkv.weight"] = arange((conv, E), 26 + i, f16)
            s[p + "linear_attn.in_proj_z.weight"] = arange((nv * hv, E), 28 + i, f16)
            s[p + "linear_attn.in_proj_b.weight"] = arange((nv, E), 30 + i, f16)
            s[p + "linear_attn.in_proj_a.weight"] = arange((nv, E), 32 + i, f16)
            s[p + "linear_attn.out_proj.weight"] = arange((E, nv * hv), 34 + i, f16)
            s[p + "linear_attn.norm.weight"] = arange((hv,), 36 + i, f16)
            s[p + "linear_attn.A_log"] = arange((nv,), 38 + i, np.float32)
            s[p + "linear_attn.dt_bias"] = arange((nv,), 40 + i, f16)
            s[p + "linear_attn.conv1d.weight"] = arange((conv, 1, K), 42 + i, f16)
    mt = {"mtp.fc.weight": arange((E, 2 * E), 50, f16), "mtp.norm.weight": arange((E,), 51, f16),
          "mtp.pre_fc_norm_embedding.weight": arange((E,), 52, f16),
          "mtp.pre_fc_norm_hidden.weight": arange((E,), 53, f16)}
    p = "mtp.layers.0."
    for k, shape, sd in [("input_layernorm.weight", (E,), 54), ("post_attention_layernorm.weight", (E,), 55),
                         ("self_attn.q_proj.weight", (2 * H * hd, E), 56), ("self_attn.k_proj.weight", (KV * hd, E), 57),
                         ("self_attn.v_proj.weight", (KV * hd, E), 58), ("self_attn.o_proj.weight", (E, H * hd), 59),
                         ("self_attn.q_norm.weight", (hd,), 60), ("self_attn.k_norm.weight", (hd,), 61),
                         ("mlp.gate_proj.weight", (F, E), 62), ("mlp.up_proj.weight", (F, E), 63),
                         ("mlp.down_proj.weight", (E, F), 64)]:
        mt[p + k] = arange(shape, sd, f16)
    names = {"model-00001-of-00002.safetensors": a, "model-00002-of-00002.safetensors": b}
    wm = {}
    for fn, t in names.items():
        save_file(t, os.path.join(d, fn))
        wm.update({k: fn for k in t})
    save_file(mt, os.path.join(d, "mtp.safetensors"))
    json.dump({"metadata": {"total_size": 0}, "weight_map": dict(sorted(wm.items()))},
              open(os.path.join(d, "model.safetensors.index.json"), "w"), indent=1)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)


def raw_file(path, tensors, meta=None):
    """tensors: [(name, dtype, shape, bytes)] written in order, by the spec."""
    hdr, off = {}, 0
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dt, shape, data in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors))


def fp8():
    d = os.path.join(out, "fp8")
    os.makedirs(d, exist_ok=True)
    E, F, H, KV, V, L = 16, 32, 4, 2, 300, 1
    hd = E // H
    bs = [8, 12]
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": E,
           "intermediate_size": F, "num_attention_heads": H, "num_key_value_heads": KV,
           "num_hidden_layers": L, "vocab_size": V, "rms_norm_eps": 1e-5, "max_position_embeddings": 64,
           "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": bs}}
    ts = [("model.embed_tokens.weight", "F32", [V, E], arange((V, E), 1).tobytes()),
          ("model.norm.weight", "F32", [E], arange((E,), 2).tobytes())]
    p = "model.layers.0."
    ts += [(p + "input_layernorm.weight", "F32", [E], arange((E,), 3).tobytes()),
           (p + "post_attention_layernorm.weight", "F32", [E], arange((E,), 4).tobytes())]
    for k, (r, c), sd in [("self_attn.q_proj", (H * hd, E), 5), ("self_attn.k_proj", (KV * hd, E), 6),
                          ("self_attn.v_proj", (KV * hd, E), 7), ("self_attn.o_proj", (E, H * hd), 8),
                          ("mlp.gate_proj", (F, E), 9), ("mlp.up_proj", (F, E), 10), ("mlp.down_proj", (E, F), 11)]:
        codes = ((np.arange(r * c) * 7 + sd) % 0x7e).astype(np.uint8)   # no 0x7f: that is NaN
        codes[::3] |= 0x80
        sc = ((np.arange(-(-r // bs[0]) * -(-c // bs[1])) + sd) / 16.0 + 0.25).astype(np.float32)
        ts.append((p + k + ".weight", "F8_E4M3", [r, c], codes.tobytes()))
        ts.append((p + k + ".weight_scale_inv", "F32", [-(-r // bs[0]), -(-c // bs[1])], sc.tobytes()))
    raw_file(os.path.join(d, "model.safetensors"), ts)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    import shutil
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(out, "llama", f), d)


def bf16():
    x = np.array([1.0, -2.0, 0.5, 3.140625, 0.0, -0.0], np.float32)
    b = (x.view(np.uint32) >> 16).astype("<u2").tobytes()
    raw_file(os.path.join(out, "bf16.safetensors"),
             [("w", "BF16", [2, 3], b), ("e", "I64", [0], b""), ("s", "F32", [], struct.pack("<f", 7.0)),
              ("f8", "F8_E4M3", [2], bytes([0x38, 0xb8]))],
             {"note": "hand-written"})


if __name__ == "__main__":
    os.makedirs(out, exist_ok=True)
    llama()
    qwen35()
    fp8()
    bf16()
    os.makedirs(fuzz, exist_ok=True)
    raw_file(os.path.join(fuzz, "seed1"), [("a", "F16", [2, 2], bytes(8)), ("b", "U8", [3], b"abc")])
    raw_file(os.path.join(fuzz, "seed2"), [("x", "BF16", [1], b"\x80\x3f")], {"k": "v"})
    import shutil
    shutil.copy(os.path.join(out, "bf16.safetensors"), os.path.join(fuzz, "seed3"))
