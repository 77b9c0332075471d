#!/usr/bin/env python3
"""Convert the step-n fixture's NextN blocks to a draft GGUF with llama.cpp's own converter.

llama.cpp publishes a step35 model's NextN blocks as a GGUF of their own:
convert_hf_to_gguf.py --mtp keeps only the blocks (model.layers.N+ as
blk.N.*, their nextn.* tensors, each block's shared_head.output as
nextn.shared_head_head) beside token_embd, output_norm and output, with
the trunk's metadata (block_count counting the blocks,
nextn_predict_layers, the per-layer arrays over every block); --no-mtp
writes the trunk alone.  This runs the first on t/data/step35/step-n and
writes its GGUF beside the checkpoint as llamacpp-mtp.gguf (float32, so
that its tensors are byte for byte those of quant-nvfp4 --type F32).

llama.cpp's Step35Model reads StepFun's own config.json keys, which
transformers 5.17's step3p7 config (the one the fixture carries) renames
or splits, so the converter is given a copy of the checkpoint whose
config.json adds them, each derived from the transformers keys:
num_attention_groups (num_key_value_heads), attention_other_setting
(the sliding layers' query heads), moe_num_experts / moe_top_k,
layer_types and partial_rotary_factors over the trunk's layers and then
the NextN layers' (mtp_layer_types), moe_layers_enum (the sparse trunk
layers), with the text_config's keys at the top level as StepFun's flat
config has them.  Its vocabulary step is skipped (the fixture's
tokenizer is not one llama.cpp knows): the draft has no tokenizer
metadata, which a draft does not need.

usage: make-step35-draft.py LLAMACPP [STEP_N_DIR]
       (LLAMACPP: the llama.cpp source tree, convert_hf_to_gguf.py beside
       conversion/ and gguf-py/; STEP_N_DIR: t/data/step35/step-n; run
       with a Python that has torch, e.g. /work/torchenv/bin/python)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

# llama.cpp's converter without its vocabulary step.
LLAMACPP_SHIM = r"""
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/gguf-py")
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[2:]
import conversion.base as base
base.TextModel.set_vocab = lambda self: None
import runpy
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def stepfun_config(cfg):
    """cfg (transformers 5.17's step3p7 config.json) with StepFun's keys added."""
    t = dict(cfg["text_config"])
    kinds = t["layer_types"] + t.get("mtp_layer_types", [])
    t.update(
        num_attention_groups=t["num_key_value_heads"],
        attention_other_setting={"num_attention_heads": t["num_sliding_attention_heads"],
                                 "num_attention_groups": t["num_key_value_heads"]},
        moe_num_experts=t["n_routed_experts"], moe_top_k=t["num_experts_per_tok"],
        layer_types=kinds,
        partial_rotary_factors=[1.0 if k == "sliding_attention" else 0.5 for k in kinds],
        moe_layers_enum=",".join(str(i) for i, k in enumerate(t["mlp_layer_types"])
                                 if k == "sparse"))
    out = dict(cfg, text_config=t)
    for k, v in t.items():
        out.setdefault(k, v)
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.split("usage: ")[1])
    lcpp = sys.argv[1]
    src = sys.argv[2] if len(sys.argv) == 3 else "t/data/step35/step-n"
    out = os.path.join(src, "llamacpp-mtp.gguf")
    with tempfile.TemporaryDirectory() as top:
        d = os.path.join(top, os.path.basename(os.path.abspath(src)))  # general.name's source
        os.mkdir(d)
        for f in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
            os.symlink(os.path.abspath(os.path.join(src, f)), os.path.join(d, f))
        with open(os.path.join(src, "config.json")) as f:
            cfg = stepfun_config(json.load(f))
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        tmp = os.path.join(top, "mtp.gguf")
        subprocess.run([sys.executable, "-c", LLAMACPP_SHIM, lcpp, d, "--outtype", "f32",
                        "--mtp", "--outfile", tmp], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.copyfile(tmp, out)
    os.chmod(out, 0o644)
    print(out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
