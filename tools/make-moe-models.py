#!/usr/bin/env python3
"""Make tiny random-weight qwen3_5_moe checkpoints with float32 reference logits.

Runs where transformers 5.17 has the qwen3_5_moe classes (CPU is enough:
/work/torchenv/bin/python).  For each configuration it writes
OUT/<name>/{config.json, model.safetensors, refs.json}: the weights in
float32 as save_pretrained writes them (the hub layout: one tensor per
expert, mlp.experts.E.{gate,up,down}_proj.weight), and the logits of every
position of a few fixed token sequences plus a greedy continuation (full
re-forwards, no cache), computed in float32 by transformers itself.

A config with "mtp" gets mtp_num_hidden_layers = 1 in config.json and random
mtp.* tensors in the hub names (fc, pre_fc_norm_embedding,
pre_fc_norm_hidden, norm, layers.0.* with an MoE FFN).  transformers 5.17
never runs them (it drops ^mtp.* on load), so they have no reference logits:
speculative decoding must give the plain-decode tokens whatever they hold.

Each directory also gets t/data/st/llama's tokenizer.json and
tokenizer_config.json (a 284-token byte-level BPE), so that quant-nvfp4,
run-gen and run-spec take them as they take any checkpoint.

A config with "nvfp4" is written as a compressed-tensors NVFP4 checkpoint
(llm-compressor's NVFP4A16 layout, see tools/make-nvfp4-fixtures.py) of its
routed experts, one global scale an expert: expert e's weights are first
multiplied by SPREAD[e], so the experts' global scales differ by up to 4x.
The other tensors stay float32 (the quantization_config's ignore list).
Its refs.json is transformers' forward of the values the checkpoint encodes
(each expert's e2m1 * e4m3 times float32(1 / global), as llama.cpp's
converter and the NVFP4 loader read them), through a float32 copy of them.

With LLAMACPP (the llama.cpp source tree: convert_hf_to_gguf.py beside
conversion/ and gguf-py/), the configs marked "gguf" are also converted by
llama.cpp's own converter to OUT/<name>/llamacpp-f32.gguf (an "nvfp4" one to
llamacpp-nvfp4.gguf: its experts' NVFP4 blocks and F32 [n_expert] .scale
vectors), its vocabulary step skipped: the tensor names, shapes and metadata
are llama.cpp's.

usage: make-moe-models.py OUTDIR [LLAMACPP]   (run from the top of the tree;
       the nvfp4 config needs ml_dtypes beside torch and transformers)
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch

BASE = dict(
    model_type="qwen3_5_moe_text", vocab_size=320, hidden_size=64,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
    linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
    linear_num_key_heads=2, linear_num_value_heads=4,
    max_position_embeddings=512, rms_norm_eps=1e-6, hidden_act="silu",
    attention_bias=False, attention_dropout=0.0, eos_token_id=319, pad_token_id=318,
    bos_token_id=None, use_cache=True, tie_word_embeddings=False,
    moe_intermediate_size=16, shared_expert_intermediate_size=24,
    rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                     "partial_rotary_factor": 0.25},
)

CONFIGS = {
    # 8 experts, top 2, attention every 4th layer, an MTP block
    "moe-e8k2-mtp": dict(BASE, num_hidden_layers=4, num_experts=8, num_experts_per_tok=2,
                         full_attention_interval=4, mtp=1, gguf=1),
    # 4 experts, top 1 (the renormalised weight is 1), attention every 2nd layer, tied head
    "moe-e4k1-tied": dict(BASE, num_hidden_layers=4, num_experts=4, num_experts_per_tok=1,
                          full_attention_interval=2, tie_word_embeddings=True,
                          linear_num_key_heads=4, linear_num_value_heads=4,
                          moe_intermediate_size=32, shared_expert_intermediate_size=16),
    # 6 experts, top 2, value heads 4 x key heads, wider shared expert
    "moe-e6k2-r4": dict(BASE, num_hidden_layers=4, num_experts=6, num_experts_per_tok=2,
                        full_attention_interval=4, linear_num_key_heads=1,
                        linear_num_value_heads=4, shared_expert_intermediate_size=48),
    # 4 experts, top 2, experts 64 wide (every expert matrix's rows a multiple of 64, as
    # GGUF's NVFP4 needs): NVFP4 experts with a global scale each, the MTP block's too
    "moe-e4k2-nvfp4": dict(BASE, num_hidden_layers=4, num_experts=4, num_experts_per_tok=2,
                           full_attention_interval=2, moe_intermediate_size=64, mtp=1,
                           nvfp4=1, gguf=1),
}
SPREAD = (0.5, 1.0, 2.0, 1.5)	# expert e's weights times SPREAD[e] in the nvfp4 config

SEQS = [
    [5, 17, 250, 3, 99, 99, 99, 42, 7, 1, 0, 310, 64, 64, 128, 9],
    [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215,
     1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
    [311],
]
GREEDY_PROMPT = [5, 17, 250, 3, 99, 42, 7, 1]
GREEDY_NEW = 16


def layer_types(cfg):
    n, k = cfg["num_hidden_layers"], cfg["full_attention_interval"]
    return ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n)]


def randomize(model):
    """Random norms (HF zero-centres them) and larger weights, as make-tiny-models.py."""
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                p.normal_(0.0, 0.3) if "norm" in pname else p.normal_(0.0, 0.5)
            elif pname.endswith("mlp.gate.weight"):
                p.normal_(0.0, 0.5)	# a router that prefers some experts
            else:
                p.normal_(0.0, 0.08)
            if pname.endswith("A_log"):
                p.uniform_(-1.0, 1.0)


def build(name, cfg):
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = dict(cfg)
    mt = cfg.pop("model_type")
    mtp = cfg.pop("mtp", 0)
    cfg.pop("gguf", 0)
    cfg.pop("nvfp4", 0)
    cfg["layer_types"] = layer_types(cfg)
    if mtp:
        cfg["mtp_num_hidden_layers"] = mtp
    conf = AutoConfig.for_model(mt, **cfg)
    torch.manual_seed(sum(map(ord, name)))
    model = AutoModelForCausalLM.from_config(conf, torch_dtype=torch.float32,
                                             attn_implementation="eager")
    randomize(model)
    model.eval()
    return model, mtp


def mtp_tensors(model, name):
    """Random mtp.* tensors in the hub names: one full-attention block with an MoE FFN."""
    c = model.config
    g = torch.Generator().manual_seed(sum(map(ord, name)) + 1)
    H, E, I, S = c.hidden_size, c.num_experts, c.moe_intermediate_size, c.shared_expert_intermediate_size
    hd, nh, nkv = c.head_dim, c.num_attention_heads, c.num_key_value_heads

    def w(*shape, s=0.08):
        return (torch.randn(*shape, generator=g) * s).contiguous()
    t = {"mtp.fc.weight": w(H, 2 * H),
         "mtp.pre_fc_norm_embedding.weight": w(H, s=0.3),
         "mtp.pre_fc_norm_hidden.weight": w(H, s=0.3),
         "mtp.norm.weight": w(H, s=0.3)}
    p = "mtp.layers.0."
    t.update({p + "input_layernorm.weight": w(H, s=0.3),
              p + "post_attention_layernorm.weight": w(H, s=0.3),
              p + "self_attn.q_proj.weight": w(2 * nh * hd, H),
              p + "self_attn.k_proj.weight": w(nkv * hd, H),
              p + "self_attn.v_proj.weight": w(nkv * hd, H),
              p + "self_attn.o_proj.weight": w(H, nh * hd),
              p + "self_attn.q_norm.weight": w(hd, s=0.3),
              p + "self_attn.k_norm.weight": w(hd, s=0.3),
              p + "mlp.gate.weight": w(E, H, s=0.5),
              p + "mlp.shared_expert.gate_proj.weight": w(S, H),
              p + "mlp.shared_expert.up_proj.weight": w(S, H),
              p + "mlp.shared_expert.down_proj.weight": w(H, S),
              p + "mlp.shared_expert_gate.weight": w(1, H)})
    for e in range(E):
        q = p + "mlp.experts.%d." % e
        t.update({q + "gate_proj.weight": w(I, H), q + "up_proj.weight": w(I, H),
                  q + "down_proj.weight": w(H, I)})
    return t


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float()


def refs(model):
    out = []
    for ids in SEQS:
        out.append({"input_ids": ids,
                    "logits": [[float("%.7g" % v) for v in row] for row in logits_of(model, ids).tolist()]})
    ids = list(GREEDY_PROMPT)
    for _ in range(GREEDY_NEW):
        ids.append(int(logits_of(model, ids)[-1].argmax()))
    return out, {"input_ids": GREEDY_PROMPT, "new_ids": ids[len(GREEDY_PROMPT):]}


def save(model, mtp, name, d):
    from safetensors.torch import load_file, save_file
    model.save_pretrained(d, safe_serialization=True)
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    if mtp:
        sd.update(mtp_tensors(model, name))
    save_file({k: v.contiguous() for k, v in sorted(sd.items())}, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)
    for f in ("generation_config.json",):
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    return sorted(sd)


def nvfp4_maker():
    """tools/make-nvfp4-fixtures.py as a module: the written-out compressed-tensors rule"""
    spec = importlib.util.spec_from_file_location("nvfp4", "tools/make-nvfp4-fixtures.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


CT_IGNORE = ["lm_head", "re:.*embed.*", "re:.*self_attn.*", "re:.*linear_attn.*",
             "re:.*shared_expert.*", "re:.*mlp\\.gate$"]


def nvfp4_experts(d):
    """Rewrite d's routed experts as compressed-tensors NVFP4, a global scale each; return
    transformers' model of the values the checkpoint encodes."""
    import numpy as np
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM
    nv = nvfp4_maker()
    path, cfgp = os.path.join(d, "model.safetensors"), os.path.join(d, "config.json")
    sd = load_file(path)
    out, deq = {}, {}
    for k, v in sd.items():
        m = re.search(r"\.experts\.(\d+)\.(gate|up|down)_proj\.weight$", k)
        if m is None:
            out[k], deq[k] = v.numpy(), v
            continue
        p, s, g = nv.ct_rule((v * SPREAD[int(m.group(1))]).numpy())
        mod = k[:-len(".weight")]
        out[mod + ".weight_packed"], out[mod + ".weight_scale"] = p, s
        out[mod + ".weight_global_scale"] = g
        deq[k] = torch.from_numpy(nv.deq_blocks(p, s) * (np.float32(1) / g[0]))
    cfg = json.load(open(cfgp))
    with tempfile.TemporaryDirectory() as t:
        json.dump(cfg, open(os.path.join(t, "config.json"), "w"))
        save_file(deq, os.path.join(t, "model.safetensors"), metadata={"format": "pt"})
        model = AutoModelForCausalLM.from_pretrained(t, torch_dtype=torch.float32,
                                                     attn_implementation="eager")
    nv.write_st(out, path)
    os.chmod(path, 0o644)
    cfg["quantization_config"] = nv.ct_config(CT_IGNORE)
    json.dump(cfg, open(cfgp, "w"), indent=2)
    model.eval()
    return model


# Run llama.cpp's converter on d without its vocabulary step (no tokenizer here).
LLAMACPP_SHIM = r"""
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/gguf-py")
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[2:]
import conversion.base as base
base.TextModel.set_vocab = lambda self: None
import runpy
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def llamacpp_convert(src, d, mtp, nvfp4):
    out = os.path.join(d, "llamacpp-nvfp4.gguf" if nvfp4 else "llamacpp-f32.gguf")
    subprocess.run([sys.executable, "-c", LLAMACPP_SHIM, src, d, "--outtype", "f32",
                    "--outfile", out] + ([] if mtp else ["--no-mtp"]), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.chmod(out, 0o644)
    return out


def main():
    outdir = sys.argv[1]
    lcpp = sys.argv[2] if len(sys.argv) > 2 else None
    import transformers
    for name, cfg in CONFIGS.items():
        model, mtp = build(name, cfg)
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        names = save(model, mtp, name, d)
        if cfg.get("nvfp4"):
            model = nvfp4_experts(d)
        seqs, greedy = refs(model)
        with open(os.path.join(d, "refs.json"), "w") as f:
            json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                       "dtype": "float32", "attn": "eager", "sequences": seqs,
                       "greedy": greedy}, f)
        print(name, sum(p.numel() for p in model.parameters()), "params,",
              sum(".experts." in n for n in names), "expert tensors ->", d)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(os.path.join("t/data/st/llama", f), os.path.join(d, f))
        if lcpp and cfg.get("gguf"):
            print("  llama.cpp:", llamacpp_convert(lcpp, d, mtp, cfg.get("nvfp4")))


if __name__ == "__main__":
    main()
