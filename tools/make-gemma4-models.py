#!/usr/bin/env python3
"""Make tiny random-weight Gemma-4 text checkpoints with float32 reference logits.

Runs where transformers 5.17 has the gemma4 classes (CPU is enough:
/work/torchenv/bin/python).  For each configuration it writes
OUT/<name>/{config.json, model.safetensors, refs.json}: Gemma4ForCausalLM's
weights in float32 as save_pretrained writes them (config model_type
gemma4_text, names model.*), and the logits of every position of a few
fixed token sequences plus a greedy continuation (full re-forwards, no
cache), computed in float32 by transformers itself with eager attention.

A config marked "cg" is written as Gemma4ForConditionalGeneration would
hold its text side: config.json {"model_type": "gemma4", "text_config":
{...}} and every name under model.language_model.* (no vision or audio
tower: those are not ours to run).

Every norm weight, layer_scalar, router scale and per-expert scale is
drawn at random (transformers initialises them to ones), so that a
forward that skips one of them cannot pass.

Each directory also gets t/data/st/llama's tokenizer.json and
tokenizer_config.json (a 284-token byte-level BPE), so that run-gen and
run-spec take text prompts.

With LLAMACPP (llama.cpp's source tree: convert_hf_to_gguf.py beside
conversion/ and gguf-py/), the configs marked "gguf" are also converted by
llama.cpp's own converter to OUT/<name>/llamacpp-f32.gguf, its vocabulary
step skipped.

The target g4-dense also gets a tiny random gemma4_assistant drafter,
OUT/g4-assistant (Gemma4AssistantForCausalLM as save_pretrained writes
it; its first draft step trained a little on the target's own greedy
text, so that drafts get accepted), with refs.json holding, for each of ASSIST_PROMPTS, ASSIST_STEPS
draft steps as transformers' SinglePositionMultiTokenCandidateGenerator
runs them on the clean inputs (h: the target's hidden_states[-1] at the
prompt's last position, t: the target's greedy token after the prompt,
the target's shared_kv_states of the prompt, position_ids the prompt's
length): each step's logits and greedy token.

usage: make-gemma4-models.py [--only NAME,...] OUTDIR [LLAMACPP]   (run from the top of the tree)
--only makes the named configurations only (g4-assistant comes with g4-dense).
"""
import json
import os
import shutil
import subprocess
import sys

import torch

BASE = dict(
    model_type="gemma4_text", vocab_size=320, hidden_size=32, intermediate_size=48,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32,
    max_position_embeddings=512, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
    sliding_window=5, final_logit_softcapping=None, hidden_size_per_layer_input=0,
    vocab_size_per_layer_input=320, attention_k_eq_v=False, num_kv_shared_layers=0,
    enable_moe_block=False, use_double_wide_mlp=False, tie_word_embeddings=True,
    eos_token_id=319, pad_token_id=318, bos_token_id=2,
    rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                           "rope_theta": 1000000.0},
    },
)
S, F = "sliding_attention", "full_attention"

CONFIGS = {
    # 31B style: sliding and global layers of different head sizes, soft-capped logits
    "g4-dense": dict(BASE, num_hidden_layers=5, layer_types=[S, S, F, S, F],
                     final_logit_softcapping=30.0, gguf=1),
    # E2B/E4B style: per-layer embeddings, the last two layers share earlier K/V,
    # double-wide MLPs on those, no soft-capping
    "g4-ple-shared": dict(BASE, num_hidden_layers=6, layer_types=[S, S, F, S, S, F],
                          hidden_size_per_layer_input=8, num_kv_shared_layers=2,
                          use_double_wide_mlp=True, final_logit_softcapping=15.0, gguf=1),
    # 26B-A4B style: K = V on the global layers (one global kv head), an MoE block beside
    # each MLP, held as Gemma4ForConditionalGeneration holds its text model
    "g4-moe-keqv": dict(BASE, num_hidden_layers=4, layer_types=[S, F, S, F],
                        attention_k_eq_v=True, num_global_key_value_heads=1,
                        enable_moe_block=True, num_experts=6, top_k_experts=2,
                        moe_intermediate_size=16, final_logit_softcapping=30.0, cg=1, gguf=1),
    # 26B-A4B / 31B head sizes: global heads of 512 (transformers' default global_head_dim),
    # sliding ones of 16; kept small (hidden 16, 2 query heads on 1 K/V head, one global layer)
    "g4-h512": dict(BASE, hidden_size=16, num_attention_heads=2, num_key_value_heads=1,
                    global_head_dim=512, num_hidden_layers=3, layer_types=[S, S, F],
                    final_logit_softcapping=30.0, gguf=1),
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
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("per_expert_scale"):
                p.uniform_(0.5, 1.5)
            elif p.dim() == 1:
                p.normal_(1.0, 0.3)
            elif pname.endswith("router.proj.weight"):
                p.normal_(0.0, 0.5)
            else:
                p.normal_(0.0, 0.08)
        for mod in model.modules():
            if hasattr(mod, "layer_scalar"):
                mod.layer_scalar.uniform_(0.6, 1.4)


def build(name, cfg):
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = {k: v for k, v in cfg.items() if k not in ("gguf", "cg")}
    mt = cfg.pop("model_type")
    conf = AutoConfig.for_model(mt, **cfg)
    torch.manual_seed(sum(map(ord, name)))
    model = AutoModelForCausalLM.from_config(conf, torch_dtype=torch.float32,
                                             attn_implementation="eager")
    randomize(model)
    model.eval()
    return model


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids]), use_cache=False).logits[0].float()


def refs(model):
    out = []
    for ids in SEQS:
        out.append({"input_ids": ids,
                    "logits": [[float("%.7g" % v) for v in row] for row in logits_of(model, ids).tolist()]})
    ids = list(GREEDY_PROMPT)
    for _ in range(GREEDY_NEW):
        ids.append(int(logits_of(model, ids)[-1].argmax()))
    # transformers' own cached greedy decode must agree with the re-forwards
    with torch.no_grad():
        g = model.generate(torch.tensor([GREEDY_PROMPT]), max_new_tokens=GREEDY_NEW,
                           do_sample=False, min_new_tokens=GREEDY_NEW)[0].tolist()
    assert g == ids, (g, ids)
    return out, {"input_ids": GREEDY_PROMPT, "new_ids": ids[len(GREEDY_PROMPT):]}


def save(model, d, cg):
    from safetensors.torch import load_file, save_file
    model.save_pretrained(d, safe_serialization=True)
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    if cg:
        sd = {"model.language_model." + k[len("model."):] if k.startswith("model.") else k: v
              for k, v in sd.items()}
        with open(os.path.join(d, "config.json")) as f:
            text = json.load(f)
        text.pop("architectures", None)
        text.pop("transformers_version", None)
        conf = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
                "text_config": text, "tie_word_embeddings": True,
                "transformers_version": text.get("transformers_version", "5.17.0")}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(conf, f, indent=2)
    save_file({k: v.contiguous() for k, v in sorted(sd.items())}, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)
    for f in ("generation_config.json",):
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    return sorted(sd)


# Run llama.cpp's converter on d without its vocabulary step (no gemma tokenizer here).
LLAMACPP_SHIM = r"""
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/gguf-py")
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[2:]
import conversion.base as base
import conversion.gemma as gemma
base.TextModel.set_vocab = lambda self: None
gemma.Gemma4Model.set_vocab = lambda self: None
_mt = gemma.Gemma3Model.modify_tensors  # its vocabulary trim reads tokenizer.json: skipped
def _modify(self, data_torch, name, bid):
    if "embed_tokens.weight" in name:
        yield from base.TextModel.modify_tensors(self, data_torch, name, bid)
        return
    yield from _mt(self, data_torch, name, bid)
gemma.Gemma3Model.modify_tensors = _modify
import runpy
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def llamacpp_convert(src, d):
    out = os.path.join(d, "llamacpp-f32.gguf")
    subprocess.run([sys.executable, "-c", LLAMACPP_SHIM, src, d, "--outtype", "f32",
                    "--outfile", out], check=True, stdout=subprocess.DEVNULL)
    os.chmod(out, 0o644)
    return out


ASSIST = dict(
    model_type="gemma4_assistant", backbone_hidden_size=32, use_ordered_embeddings=False,
    tie_word_embeddings=True,
    text_config=dict(BASE, hidden_size=24, intermediate_size=40, num_hidden_layers=3,
                     layer_types=[S, F, F], num_kv_shared_layers=3, vocab_size_per_layer_input=0,
                     final_logit_softcapping=None),
)
# the first is longer than the window (5): the sliding layer sees only the last 6 keys
ASSIST_PROMPTS = [SEQS[0], GREEDY_PROMPT, [311, 7]]
ASSIST_STEPS = 4


def assist_refs(target, asst):
    out = []
    for ids in ASSIST_PROMPTS:
        with torch.no_grad():
            o = target(torch.tensor([ids]), use_cache=False, output_hidden_states=True,
                       return_shared_kv_states=True)
        kv = o.shared_kv_states
        h = o.hidden_states[-1][:, -1:]
        t = o.logits[0, -1].argmax().view(1, 1)
        first = int(t)
        pos = torch.tensor([[len(ids)]])
        steps = []
        for _ in range(ASSIST_STEPS):
            emb = target.get_input_embeddings()(t)
            with torch.no_grad():
                a = asst(inputs_embeds=torch.cat([emb, h], dim=-1), position_ids=pos,
                         attention_mask=torch.ones(1, len(ids) + 1, dtype=torch.long),
                         shared_kv_states=kv, use_cache=False)
            lg = a.logits[0, -1].float()
            t = lg.argmax().view(1, 1)
            h = a.last_hidden_state
            steps.append({"logits": [float("%.7g" % v) for v in lg.tolist()], "id": int(t)})
        out.append({"input_ids": ids, "first": first, "steps": steps})
    return out


def distill(target, asst, steps=400):
    """Train the drafter's first step a little on the target's own greedy text (so
    that run-spec's acceptance is not 0): from token p and the target's hidden at
    p-1 over its K/V of 0..p-1, the target's token at p+1."""
    g = torch.Generator().manual_seed(7)
    samples = []
    for _ in range(12):
        ids = torch.randint(0, 310, (1, 6), generator=g)
        with torch.no_grad():
            seq = target.generate(ids, max_new_tokens=26, do_sample=False, min_new_tokens=26)
            o = target(seq, use_cache=False, output_hidden_states=True,
                       return_shared_kv_states=True)
        emb = target.get_input_embeddings()(seq).detach()
        for p in range(4, seq.shape[1] - 1):
            kv = {k: (v[0][:, :, :p].detach(), v[1][:, :, :p].detach())
                  for k, v in o.shared_kv_states.items()}
            x = torch.cat([emb[:, p:p + 1], o.hidden_states[-1][:, p - 1:p].detach()], dim=-1)
            samples.append((x, kv, p, int(seq[0, p + 1])))
    opt = torch.optim.Adam([q for q in asst.parameters() if q.requires_grad], lr=3e-3)
    asst.train()
    for _ in range(steps):
        opt.zero_grad()
        loss = 0
        for i in torch.randint(0, len(samples), (8,), generator=g).tolist():
            x, kv, p, want = samples[i]
            a = asst(inputs_embeds=x, position_ids=torch.tensor([[p]]),
                     attention_mask=torch.ones(1, p + 1, dtype=torch.long),
                     shared_kv_states=kv, use_cache=False)
            loss = loss + torch.nn.functional.cross_entropy(a.logits[0], torch.tensor([want]))
        loss.backward()
        opt.step()
    asst.eval()


def make_assistant(outdir, target):
    from transformers import AutoConfig, AutoModelForCausalLM
    from safetensors.torch import load_file, save_file
    import transformers
    cfg = dict(ASSIST)
    mt = cfg.pop("model_type")
    tc = dict(cfg.pop("text_config"))
    tc.pop("model_type")
    conf = AutoConfig.for_model(mt, text_config=AutoConfig.for_model("gemma4_text", **tc), **cfg)
    torch.manual_seed(4242)
    asst = AutoModelForCausalLM.from_config(conf, torch_dtype=torch.float32,
                                            attn_implementation="eager")
    randomize(asst)
    distill(target, asst)
    d = os.path.join(outdir, "g4-assistant")
    os.makedirs(d, exist_ok=True)
    asst.save_pretrained(d, safe_serialization=True)
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    save_file({k: v.contiguous() for k, v in sorted(sd.items())}, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)
    if os.path.exists(os.path.join(d, "generation_config.json")):
        os.remove(os.path.join(d, "generation_config.json"))
    with open(os.path.join(d, "refs.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                   "dtype": "float32", "attn": "eager", "target": "g4-dense",
                   "drafts": assist_refs(target, asst)}, f)
    print("g4-assistant", sum(p.numel() for p in asst.parameters()), "params,", len(sd),
          "tensors ->", d)


def main():
    args = sys.argv[1:]
    only = None
    if args[:1] == ["--only"]:
        only = args[1].split(",")
        args = args[2:]
        unknown = [n for n in only if n not in CONFIGS]
        if unknown:
            sys.exit("make-gemma4-models.py: --only: no configuration %s" % ", ".join(unknown))
    outdir = args[0]
    lcpp = args[1] if len(args) > 1 else None
    import transformers
    for name, cfg in CONFIGS.items():
        if only is not None and name not in only:
            continue
        model = build(name, cfg)
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        names = save(model, d, cfg.get("cg"))
        seqs, greedy = refs(model)
        with open(os.path.join(d, "refs.json"), "w") as f:
            json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                       "dtype": "float32", "attn": "eager", "sequences": seqs,
                       "greedy": greedy}, f)
        print(name, sum(p.numel() for p in model.parameters()), "params,", len(names),
              "tensors ->", d)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(os.path.join("t/data/st/llama", f), os.path.join(d, f))
        if lcpp and cfg.get("gguf"):
            print("  llama.cpp:", llamacpp_convert(lcpp, d))
        if name == "g4-dense":
            make_assistant(outdir, model)


if __name__ == "__main__":
    main()
