#!/usr/bin/env python3
"""Make tiny random-weight HF checkpoints with float32 reference logits.

Runs where transformers has the qwen3_5 and llama model classes (the GPU
machine has transformers 5.17; CPU is enough).  For each configuration it
writes OUT/<name>/{config.json, model.safetensors, refs.json}: the weights in
float32, and the logits of every position of a few fixed token sequences,
computed in float32 by transformers itself.  These cover shapes the trained
fixture (../shared/models/A) lacks: other value/key head ratios, tied heads,
another attention interval and rotary fraction, and the llama architecture.

usage: make-tiny-models.py OUTDIR
"""
import json
import os
import sys

import torch

QWEN = dict(
    model_type="qwen3_5_text", vocab_size=320, hidden_size=64, intermediate_size=96,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
    linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
    max_position_embeddings=512, rms_norm_eps=1e-6, hidden_act="silu",
    attention_bias=False, attention_dropout=0.0, eos_token_id=319, pad_token_id=318,
    bos_token_id=None, use_cache=True,
)

CONFIGS = {
    # value heads = 2 x key heads (like A), untied head
    "q35-r2": dict(QWEN, num_hidden_layers=4, linear_num_key_heads=2, linear_num_value_heads=4,
                   full_attention_interval=4, tie_word_embeddings=False,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                                    "partial_rotary_factor": 0.25}),
    # equal key/value heads, tied head, attention every 2nd layer, half rotary
    "q35-r1-tied": dict(QWEN, num_hidden_layers=4, linear_num_key_heads=4, linear_num_value_heads=4,
                        full_attention_interval=2, tie_word_embeddings=True, rms_norm_eps=1e-5,
                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                         "partial_rotary_factor": 0.5}),
    # value heads = 4 x key heads, wider attention heads, GQA 4:1
    "q35-r4": dict(QWEN, num_hidden_layers=4, linear_num_key_heads=1, linear_num_value_heads=4,
                   num_attention_heads=4, num_key_value_heads=1, head_dim=32,
                   full_attention_interval=4, tie_word_embeddings=False,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                                    "partial_rotary_factor": 0.25}),
}

LLAMA = dict(
    model_type="llama", vocab_size=320, hidden_size=64, intermediate_size=96,
    num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=512, rms_norm_eps=1e-5, rope_theta=10000.0,
    tie_word_embeddings=True, hidden_act="silu", bos_token_id=1, eos_token_id=2,
)

SEQS = [
    [5, 17, 250, 3, 99, 99, 99, 42, 7, 1, 0, 310, 64, 64, 128, 9],
    [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215,
     1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
    [311],
]


def layer_types(cfg):
    n, k = cfg["num_hidden_layers"], cfg["full_attention_interval"]
    return ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n)]


def build(name, cfg):
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = dict(cfg)
    mt = cfg.pop("model_type")
    if mt.startswith("qwen3_5"):
        cfg["layer_types"] = layer_types(cfg)
    conf = AutoConfig.for_model(mt, **cfg)
    torch.manual_seed(sum(map(ord, name)))
    model = AutoModelForCausalLM.from_config(conf, torch_dtype=torch.float32, attn_implementation="eager")
    # random norms (HF zero-centres qwen norms; make them non-trivial) and larger weights
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                p.normal_(0.0, 0.3) if "norm" in pname else p.normal_(0.0, 0.5)
            else:
                p.normal_(0.0, 0.08)
            if pname.endswith("A_log"):
                p.uniform_(-1.0, 1.0)
    model.eval()
    return model


def refs(model):
    out = []
    for ids in SEQS:
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        out.append({"input_ids": ids,
                    "logits": [[float("%.7g" % v) for v in row] for row in logits.tolist()]})
    return out


def main():
    outdir = sys.argv[1]
    import transformers
    from safetensors.torch import save_file
    todo = dict(CONFIGS)
    todo["llama-tiny"] = LLAMA
    for name, cfg in todo.items():
        model = build(name, cfg)
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        model.config.save_pretrained(d)
        sd = {k: v.contiguous() for k, v in model.state_dict().items()}
        if getattr(model.config, "tie_word_embeddings", False):
            sd.pop("lm_head.weight", None)
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(d, "refs.json"), "w") as f:
            json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                       "dtype": "float32", "attn": "eager", "sequences": refs(model)}, f)
        print(name, sum(p.numel() for p in model.parameters()), "params ->", d)


if __name__ == "__main__":
    main()
