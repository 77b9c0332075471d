#!/usr/bin/env python3
"""Make a tiny random DFlash2 drafter for fixture model A, with reference outputs.

The reference implementation is z-lab's `dflash` package (PyPI dflash 0.1.0,
dflash/model.py: DFlash2DraftModel), run on transformers 5.17 + torch (CPU).
Install it beside transformers, e.g.:

    python -m venv --system-site-packages /work/venv-dflash
    /work/venv-dflash/bin/pip install --no-deps dflash==0.1.0

usage: make-dflash-fixture.py MODEL_A OUTDIR [LLAMACPP]   (from the top of the tree)

It writes OUTDIR/
  d2/config.json     the drafter's config as z-lab publishes one (architectures
                     DFlash2DraftModel, model_type qwen3, dflash_config {...})
  d2/model.safetensors  its weights in bfloat16 under the published names (no
                     "model." prefix; the selector's codebooks without a
                     ".weight" suffix, which DFlash2DraftModel.from_pretrained
                     maps back): the reference below is computed by the model
                     loaded back from this file, so the layout is checked too
  refs.safetensors   float32 references (I32 ids):
      tokens  [P+1]      model A's prompt (P tokens) and the anchor, A's greedy
                         next token after it
      taps    [P][T*H]   A's hidden states at target_layer_ids for the prompt
                         (extract_context_feature: hidden_states[id + 1]),
                         concatenated in target_layer_ids order
      hidden  [B][H]     the drafter's output (after its final norm) for the
                         block [anchor, mask x (B-1)] at positions P..P+B-1,
                         given taps as its context at positions 0..P-1
      logits  [B-1][V]   compute_logits of rows 1..B-1 through A's lm_head
      cand    [B-1][k]   each row's top-k candidates, by logit (desc, then id)
      scores  [B-1][k]   the selector's edge scores of cand from the greedy
                         path's predecessor (the anchor for row 1)
      path    [B-1]      the greedy selector walk (CandidateSelector.select, T 0)
      w8.hidden, w8.cand, w8.scores, w8.path  the same for the variant w8
  w8/config.json     a variant of the drafter whose layers are both sliding with a
                     window of 8 (W8: every layer's cache a ring in our runtime),
                     its weights d2's (a test puts d2/model.safetensors beside
                     it): its reference is the same forward (prompt, taps, anchor)
  llamacpp-header.txt (with LLAMACPP, the llama.cpp source tree holding
                     convert_hf_to_gguf.py): llama.cpp's own conversion of the
                     drafter (--target-model-dir MODEL_A, bf16), as "name
                     type dims" lines for the tensors and "key = value" for
                     the dflash.* metadata, so a test can hold our GGUF
                     writer to it
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from dflash.model import DFlash2DraftModel, extract_context_feature

P = 24          # prompt rows: more than the sliding window, so the window bites
SEED = 20260731
W8 = 8          # the variant's window: every layer sliding

CONFIG = {
    "architectures": ["DFlash2DraftModel"],
    "model_type": "qwen3",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "head_dim": 32,
    "hidden_act": "silu",
    "hidden_size": 384,
    "intermediate_size": 64,
    "initializer_range": 0.02,
    "is_causal": False,
    "layer_types": ["sliding_attention", "full_attention"],
    "max_position_embeddings": 4096,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "num_key_value_heads": 1,
    "num_target_layers": 8,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 10000000.0, "rope_type": "default"},
    "sliding_window": 16,
    "tie_word_embeddings": False,
    "use_cache": True,
    "use_sliding_window": True,
    "vocab_size": 8192,
    "dtype": "bfloat16",
    "dflash_config": {
        "block_size": 8, "conv_group_size": 16, "conv_kernel_size": 2,
        "mask_token_id": 8189, "selector_rank": 8, "selector_top_k": 8,
        "target_layer_ids": [2, 5],
    },
}


def randomize(m, g):
    """Weights of every kind a size that makes each part matter, rounded to bf16."""
    for name, p in m.named_parameters():
        if name.endswith("norm.weight"):
            v = 1 + 0.2 * torch.randn(p.shape, generator=g)
        elif "base_kernel" in name:
            v = 0.3 * torch.randn(p.shape, generator=g)
            v[:, 0] += 1        # near identity: tap 0 passes the row, tap 1 mixes the previous
        elif "codebook" in name:
            v = torch.randn(p.shape, generator=g)
        elif "kernel_projection" in name:
            v = 0.02 * torch.randn(p.shape, generator=g)
        elif "hidden_projection" in name:
            v = 0.1 * torch.randn(p.shape, generator=g)
        else:
            v = 0.06 * torch.randn(p.shape, generator=g)
        p.data = v.to(torch.bfloat16).to(torch.float32)


def published(sd):
    """The state dict under the names z-lab's checkpoints carry."""
    out = {}
    for k, v in sd.items():
        if k.startswith("rotary_emb."):
            continue
        if k.startswith("candidate_selector.") and k.endswith("codebook.weight"):
            k = k[: -len(".weight")]
        out[k] = v.to(torch.bfloat16).contiguous()
    return out


# llama.cpp's converter without its vocabulary step (it knows no pre-tokenizer of
# model A's), which for a DFlash draft then writes only the mask token id.
LLAMACPP_SHIM = r"""
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/gguf-py")
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[2:]
import conversion.qwen as qwen
def set_vocab(self):
    self.gguf_writer.add_mask_token_id(self.hparams["dflash_config"]["mask_token_id"])
qwen.DFlashModel.set_vocab = set_vocab
import runpy
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def llamacpp_header(src, model_a, out, llamacpp):
    gguf = os.path.join(out, "llamacpp.tmp.gguf")
    subprocess.run([sys.executable, "-c", LLAMACPP_SHIM, llamacpp, src,
                    "--target-model-dir", model_a, "--outtype", "bf16", "--outfile", gguf],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sys.path.insert(0, os.path.join(llamacpp, "gguf-py"))
    import gguf as g
    r = g.GGUFReader(gguf)
    lines = []
    for t in r.tensors:
        lines.append("%s %s %s" % (t.name, t.tensor_type.name, ",".join(str(int(x)) for x in t.shape)))
    for f in r.fields.values():
        if not (f.name.startswith("dflash.") or f.name in ("general.architecture",
                                                           "tokenizer.ggml.mask_token_id")):
            continue
        v = f.contents()
        lines.append("%s = %s" % (f.name, json.dumps(v)))
    os.unlink(gguf)
    with open(os.path.join(out, "llamacpp-header.txt"), "w") as fp:
        fp.write("\n".join(lines) + "\n")


def forward(d, tgt, taps, anchor, B, mask):
    """The drafter's block at P after the context taps: its rows, their logits, each row's
    top k by logit (desc, then id), the edge scores from the greedy path's predecessor,
    and that path."""
    block = torch.tensor([[anchor] + [mask] * (B - 1)])
    noise = tgt.get_input_embeddings()(block)
    pos = torch.arange(P + B)[None]
    hidden = d(target_hidden=taps, noise_embedding=noise, position_ids=pos)
    head = tgt.lm_head
    logits = d.compute_logits(hidden[:, 1:], head)
    path, cands, _ = d.propose(hidden[:, 1:], torch.tensor([anchor]), head, 0.0)
    sel = d.candidate_selector
    gate = sel.hidden_projection(hidden[:, 1:])
    k = sel.top_k
    cand = torch.zeros(B - 1, k, dtype=torch.int32)
    scores = torch.zeros(B - 1, k)
    prev = anchor
    for t in range(B - 1):
        lg = logits[0, t]
        order = sorted(cands[0, t].tolist(), key=lambda i: (-float(lg[i]), i))
        c = torch.tensor(order)
        s = lg[c] + (sel.predecessor_codebook.weight[prev] * gate[0, t]
                     * sel.successor_codebook.weight[c]).sum(-1)
        cand[t], scores[t] = c.to(torch.int32), s
        assert int(c[int(s.argmax())]) == int(path[0, t]), t
        prev = int(path[0, t])
    return hidden[0].contiguous(), logits[0].contiguous(), cand, scores, \
        path[0].to(torch.int32).contiguous()


def variant(top, out, cfg):
    """w8/config.json: cfg with every layer sliding, window W8; the reference loads it with
    d2's weights (copied beside it in a scratch directory)."""
    v = dict(cfg, layer_types=["sliding_attention"] * cfg["num_hidden_layers"],
             sliding_window=W8)
    vdir = os.path.join(top, "w8")
    os.makedirs(vdir, exist_ok=True)
    with open(os.path.join(vdir, "config.json"), "w") as fp:
        json.dump(v, fp, indent=2)
        fp.write("\n")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(os.path.join(vdir, "config.json"), tmp)
        shutil.copy(os.path.join(out, "model.safetensors"), tmp)
        return DFlash2DraftModel.from_pretrained(tmp, dtype=torch.float32).eval()


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: make-dflash-fixture.py MODEL_A OUTDIR [LLAMACPP]")
    model_a, top = sys.argv[1], sys.argv[2]
    out = os.path.join(top, "d2")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)
    g = torch.Generator().manual_seed(SEED)

    tgt = AutoModelForCausalLM.from_pretrained(model_a, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(model_a)
    with open(os.path.join(model_a, "prompts.jsonl")) as fp:
        text = json.loads(fp.readline())["prompt"]
    ids = tok(text)["input_ids"][:P]
    assert len(ids) == P

    cfg = dict(CONFIG)
    from transformers import Qwen3Config
    m = DFlash2DraftModel(Qwen3Config(**cfg)).eval()
    randomize(m, g)
    with open(os.path.join(out, "config.json"), "w") as fp:
        json.dump(cfg, fp, indent=2)
        fp.write("\n")
    save_file(published(m.state_dict()), os.path.join(out, "model.safetensors"),
              metadata={"format": "pt"})

    # the reference: the drafter as z-lab's loader reads the published file
    d = DFlash2DraftModel.from_pretrained(out, dtype=torch.float32).eval()
    for k, v in m.state_dict().items():
        assert torch.equal(v, d.state_dict()[k]), k

    dc = cfg["dflash_config"]
    B, mask = dc["block_size"], dc["mask_token_id"]
    dv = variant(top, out, cfg)
    with torch.no_grad():
        o = tgt(torch.tensor([ids]), output_hidden_states=True)
        anchor = int(o.logits[0, -1].argmax())
        taps = extract_context_feature(o.hidden_states, d.target_layer_ids)
        hidden, logits, cand, scores, path = forward(d, tgt, taps, anchor, B, mask)
        vh, _, vc, vs, vp = forward(dv, tgt, taps, anchor, B, mask)
    # the window of 8 bites: the variant's rows are not d2's
    assert float((vh - hidden).abs().max()) > 1e-2

    save_file({
        "tokens": torch.tensor(ids + [anchor], dtype=torch.int32),
        "taps": taps[0].contiguous(),
        "hidden": hidden, "logits": logits, "cand": cand, "scores": scores, "path": path,
        "w8.hidden": vh, "w8.cand": vc, "w8.scores": vs, "w8.path": vp,
    }, os.path.join(top, "refs.safetensors"), metadata={"format": "pt"})
    print("anchor %d path %s; w8 path %s" % (anchor, path.tolist(), vp.tolist()))
    if len(sys.argv) == 4:
        llamacpp_header(out, model_a, top, sys.argv[3])


if __name__ == "__main__":
    main()
