#!/usr/bin/env python3
"""Make tiny random-weight step3p7 (Step-3.7-Flash) checkpoints with float32 reference logits.

Runs where transformers 5.17 has the step3p7 classes (CPU is enough:
/work/torchenv/bin/python).  transformers 5.17 has no Step3p7ForCausalLM:
the text model with its head is Step3p7ForConditionalGeneration, built here
with a one-layer vision tower (its weights are saved too, as in the
released checkpoint, and memra skips them).  For each configuration it
writes OUT/<name>/{config.json, model.safetensors, refs.json}: the weights
in float32 as save_pretrained writes them (the hub layout: model.layers.N.
moe.{gate,up,down}_proj.weight stacked [E][I][H], moe.router_bias,
share_expert.*), and the logits of every position of a few fixed token
sequences plus a greedy continuation (full re-forwards, no cache),
computed in float32 by transformers itself (eager attention).

The configurations cover: sliding and full layers with different query
head counts; per-type RoPE (theta and partial factor: 0.5 on full layers,
1.0 on sliding ones, the only pairing llama.cpp's converter accepts); the
head-wise sigmoid gate; dense layers then sigmoid-routed MoE layers with a
random correction bias (selection only), a routed scaling factor and the
shared expert; SwiGLU limits per layer for the routed experts
(swiglu_limits) and for the shared expert and dense MLP
(swiglu_limits_shared), small enough that they bite (checked: the logits
move when the limits are dropped).

Each directory also gets t/data/st/llama's tokenizer.json and
tokenizer_config.json (a 284-token byte-level BPE), so that run-gen and
run-spec take text prompts.

usage: make-step35-models.py OUTDIR   (run from the top of the tree)
"""
import json
import os
import shutil
import sys

import torch

VISION = dict(width=16, layers=1, heads=2, image_size=28, patch_size=14, mlp_ratio=2.0)

BASE = dict(
    vocab_size=320, hidden_size=32, intermediate_size=40, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
    num_sliding_attention_heads=6, sliding_window=5,
    layer_types=["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
    mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
    rope_theta=[5000.0, 10000.0, 10000.0, 5000.0], partial_rotary_factors=[0.5, 1.0, 1.0, 0.5],
    n_routed_experts=8, num_experts_per_tok=3, moe_intermediate_size=16, share_expert_dim=24,
    moe_router_scaling_factor=2.5, swiglu_limits=[0.0, 0.0, 0.35, 0.3],
    swiglu_limits_shared=[0.4, 0.0, 0.0, 0.35], max_position_embeddings=512,
    rms_norm_eps=1e-5, pad_token_id=1, eos_token_id=319, tie_word_embeddings=False,
)

CONFIGS = {
    # the variants above
    "step-a": dict(BASE),
    # two dense layers, 4 experts top 1 (the renormalised weight is 1), no limits,
    # query_pre_attn_scalar other than head_dim, sliding heads equal to full ones
    "step-b": dict(BASE, num_hidden_layers=3, layer_types=["sliding_attention", "full_attention",
                   "sliding_attention"], mlp_layer_types=["dense", "dense", "sparse"],
                   rope_theta=[10000.0, 1000000.0, 10000.0], partial_rotary_factors=[1.0, 0.5, 1.0],
                   n_routed_experts=4, num_experts_per_tok=1, moe_router_scaling_factor=1.0,
                   num_sliding_attention_heads=4, query_pre_attn_scalar=8,
                   swiglu_limits=None, swiglu_limits_shared=None, sliding_window=3),

    # three NextN blocks after step-a's trunk (the released layout: model.layers.4..6 with
    # enorm, hnorm, eh_proj, shared_head.{norm,output} and a decoder block each), the legacy
    # per-layer lists padded past the trunk as the hub config pads them: a full dense block,
    # then sliding MoE ones
    "step-n": dict(BASE, num_nextn_predict_layers=3,
                   layer_types=BASE["layer_types"] + ["full_attention", "sliding_attention",
                                                      "sliding_attention"],
                   mlp_layer_types=BASE["mlp_layer_types"] + ["dense", "sparse", "sparse"],
                   rope_theta=BASE["rope_theta"] + [5000.0, 10000.0, 10000.0],
                   partial_rotary_factors=BASE["partial_rotary_factors"] + [0.5, 1.0, 1.0]),
}

SEQS = [
    [5, 17, 250, 3, 99, 99, 99, 42, 7, 1, 0, 310, 64, 64, 128, 9],
    [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215,
     1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
    [311],
]
GREEDY_PROMPT = [5, 17, 250, 3, 99, 42, 7, 1]
GREEDY_NEW = 16


def randomize(model):
    """Random norms (HF zero-centres them), biases and larger weights."""
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                p.normal_(0.0, 0.3)
            elif pname.endswith("mlp.gate.weight"):
                p.normal_(0.0, 0.5)	# a router that prefers some experts
            else:
                p.normal_(0.0, 0.15)
        for bname, b in model.named_buffers():
            if bname.endswith("e_score_correction_bias"):
                b.normal_(0.0, 0.3)	# selection moves, weights do not


def build(name, cfg, limits=True):
    from transformers import Step3p7Config, Step3p7ForConditionalGeneration
    text = dict(cfg)
    if not limits:
        text["swiglu_limits"] = text["swiglu_limits_shared"] = None
    conf = Step3p7Config(text_config=text, vision_config=dict(VISION))
    torch.manual_seed(sum(map(ord, name)))
    model = Step3p7ForConditionalGeneration(conf).to(torch.float32)
    model.config._attn_implementation = "eager"
    model.config.text_config._attn_implementation = "eager"
    model.model.language_model.config._attn_implementation = "eager"
    randomize(model)
    model.eval()
    return model


def logits_of(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def refs(model):
    out = []
    for ids in SEQS:
        out.append({"input_ids": ids,
                    "logits": [[float("%.7g" % v) for v in row] for row in logits_of(model, ids).tolist()]})
    ids = list(GREEDY_PROMPT)
    for _ in range(GREEDY_NEW):
        ids.append(int(logits_of(model, ids)[-1].argmax()))
    return out, {"input_ids": GREEDY_PROMPT, "new_ids": ids[len(GREEDY_PROMPT):]}


def save(model, d):
    from safetensors.torch import load_file, save_file
    model.save_pretrained(d, safe_serialization=True)
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    save_file({k: v.contiguous() for k, v in sorted(sd.items())}, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)
    for f in ("generation_config.json",):
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    return sorted(sd)


NEXTN_SEQ = [5, 17, 250, 3, 99, 99, 99, 42, 7, 1, 0, 310, 64, 64, 128, 9, 77, 12, 250, 31]


def nextn_blocks(model, name):
    """The NextN blocks, random, as StepFun's serving code (their vLLM's step3p5_mtp.py) and
    llama.cpp's step35 graph run them: block k over slot i takes (enorm(embed(t[i+1+k])),
    hnorm(h[i])), h the trunk's hidden before its final norm (k = 0) or block k-1's output
    before its head norm; eh_proj, one Step3p7 decoder layer (transformers' own class, the
    block's layer type and MLP kind, no SwiGLU limits), then the block's own head norm and
    head.  transformers' generic MtpModel chains the normed state through the trunk's head
    instead and leaves the blocks' own heads out, so it is not the reference here."""
    from transformers.models.step3p7.modeling_step3p7 import (
        Step3p7DecoderLayer, Step3p7RMSNorm, Step3p7RotaryEmbedding)
    conf = model.config.get_mtp_config()
    conf.swiglu_limits = conf.swiglu_limits_shared = None
    # get_mtp_config takes per_layer_config from mtp_per_layer_config, which Step3p7's config
    # never sets (every block would get num_attention_heads); the blocks' query heads by their
    # layer type, as llama.cpp's converter and loader give them
    conf.per_layer_config = {k: {"num_attention_heads": conf.num_sliding_attention_heads}
                             for k, t in enumerate(conf.layer_types) if t == "sliding_attention"}
    conf._attn_implementation = "eager"
    torch.manual_seed(sum(map(ord, name)) + 1)
    H, V = conf.hidden_size, conf.vocab_size
    blocks = []
    for k in range(conf.num_hidden_layers):
        b = torch.nn.ModuleDict(dict(
            enorm=Step3p7RMSNorm(H, eps=conf.rms_norm_eps), hnorm=Step3p7RMSNorm(H, eps=conf.rms_norm_eps),
            eh_proj=torch.nn.Linear(2 * H, H, bias=False), block=Step3p7DecoderLayer(conf, k),
            norm=Step3p7RMSNorm(H, eps=conf.rms_norm_eps), head=torch.nn.Linear(H, V, bias=False)))
        randomize(b)
        blocks.append(b.to(torch.float32).eval())
    return conf, blocks, Step3p7RotaryEmbedding(config=conf)


def nextn_refs(model, conf, blocks, rotary):
    """Each block's logits over every slot it has on NEXTN_SEQ (full forwards, no cache)."""
    lm = model.model.language_model
    seen = {}
    hook = lm.norm.register_forward_hook(lambda m, i, o: seen.__setitem__("h", i[0][0]))
    ids = NEXTN_SEQ
    with torch.no_grad():
        model(input_ids=torch.tensor([ids]))
        hook.remove()
        h, out = seen["h"], []
        emb = lm.embed_tokens(torch.tensor(ids))
        for k, b in enumerate(blocks):
            n = len(ids) - 1 - k
            x = b["eh_proj"](torch.cat([b["enorm"](emb[1 + k:1 + k + n]), b["hnorm"](h[:n])], -1))
            pos = torch.arange(n)[None]
            typ = conf.layer_types[k]
            i, j = torch.arange(n)[:, None], torch.arange(n)[None]
            see = (j <= i) & ((i - j < conf.sliding_window) if typ == "sliding_attention" else True)
            mask = torch.zeros(n, n).masked_fill(~see, float("-inf"))[None, None]
            h = b["block"](x[None], attention_mask=mask, position_ids=pos,
                           position_embeddings=rotary(x[None], pos, typ))[0]
            lg = b["head"](b["norm"](h))
            out.append([[float("%.7g" % v) for v in row] for row in lg.tolist()])
    return {"input_ids": ids, "logits": out}


def save_nextn(d, model, blocks):
    """Append the blocks to model.safetensors under the hub's names (model.layers.N+k.*)."""
    from safetensors.torch import load_file, save_file
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    n = model.config.text_config.num_hidden_layers
    hub = {"mlp.gate.weight": "moe.gate.weight", "mlp.gate.e_score_correction_bias":
           "moe.router_bias", "mlp.experts.down_proj": "moe.down_proj.weight",
           "norm.weight": "shared_head.norm.weight", "head.weight": "shared_head.output.weight"}
    for k, b in enumerate(blocks):
        pre = "model.layers.%d." % (n + k)
        for key, v in b.state_dict().items():
            key = key[6:] if key.startswith("block.") else key
            if key == "mlp.experts.gate_up_proj":	# [E][2I][H]: gate rows, then up rows
                i = v.shape[1] // 2
                sd[pre + "moe.gate_proj.weight"] = v[:, :i].contiguous()
                sd[pre + "moe.up_proj.weight"] = v[:, i:].contiguous()
                continue
            key = hub.get(key, key.replace("mlp.shared_experts.", "share_expert."))
            sd[pre + key] = v.contiguous()
    save_file({k: v.contiguous() for k, v in sorted(sd.items())}, path, metadata={"format": "pt"})


def main():
    outdir = sys.argv[1]
    import transformers
    for name, cfg in CONFIGS.items():
        model = build(name, cfg)
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        names = save(model, d)
        seqs, greedy = refs(model)
        if cfg.get("swiglu_limits") or cfg.get("swiglu_limits_shared"):
            free = build(name, cfg, limits=False)
            moved = (logits_of(free, SEQS[0]) - logits_of(model, SEQS[0])).abs().max().item()
            assert moved > 1e-3, "the SwiGLU limits do not bite (%g)" % moved
            print("  limits move the logits by", moved)
        extra = {}
        if cfg.get("num_nextn_predict_layers"):
            conf, blocks, rotary = nextn_blocks(model, name)
            extra["nextn"] = nextn_refs(model, conf, blocks, rotary)
            save_nextn(d, model, blocks)
        with open(os.path.join(d, "refs.json"), "w") as f:
            json.dump(dict({"transformers": transformers.__version__, "torch": torch.__version__,
                            "dtype": "float32", "attn": "eager", "sequences": seqs,
                            "greedy": greedy}, **extra), f)
        print(name, sum(p.numel() for p in model.parameters()), "params ->", d)
        print("  ", [n for n in names if n.startswith("model.layers.1.")])
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(os.path.join("t/data/st/llama", f), os.path.join(d, f))


if __name__ == "__main__":
    main()
