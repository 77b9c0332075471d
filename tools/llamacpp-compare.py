#!/usr/bin/env python3
"""llamacpp-compare.py [--check] [--prompts NAME,...] [--ways batch,gen] MODEL.gguf GOLDEN.json
[MODEL_LOGITS [f16|f32]]: our logits (build/t/tools/model-logits) against
llama.cpp's (llama-cpp-python) along llama.cpp's greedy path of each golden
prompt, computed both ways llama.cpp computes them: the whole sequence in
one batch ("batch"), and the prompt in one batch then one token at a time as
generation runs ("gen"; llama.cpp's kernels for one row sum in other orders
than its batched ones).  Prints, per prompt and way, the largest logit
difference, the first position where the argmaxes differ, and there both
sides' top-2 margins: a near tie is a margin smaller than the difference
between the two implementations.  Both sides use the KV cache type given
(f16, llama.cpp's default, when none).

memra's llama numerics are those of llama.cpp's x86 AVX-512 build; a peer
built for other kernels (GGML_NATIVE on a CPU without AVX-512: 8-lane sums,
another exp) sums in other orders.  The first line says which: "peer:
avx512" or "peer: other (...)".  --check makes the exit status the verdict:
with an AVX-512 peer every logit must be equal (exit 1 otherwise); with
another peer the argmaxes must be equal but where llama.cpp's own top-2
margin is below NEAR_TIE (a near tie, reported, not a failure)."""
import argparse
import json
import subprocess
import sys

import llama_cpp
import numpy as np

NEAR_TIE = 0.5

ap = argparse.ArgumentParser()
ap.add_argument("--check", action="store_true")
ap.add_argument("--prompts")
ap.add_argument("--ways", default="batch,gen")
ap.add_argument("model")
ap.add_argument("golden")
ap.add_argument("tool", nargs="?", default="build/t/tools/model-logits")
ap.add_argument("kv", nargs="?", default="f16", choices=("f16", "f32"))
a = ap.parse_args()

info = llama_cpp.llama_print_system_info().decode()
avx512 = "AVX512 = 1" in info
print("peer: avx512" if avx512 else "peer: other (" + info.strip() + ")")
kvt = {"f32": 0, "f16": 1}[a.kv]
d = json.load(open(a.golden))
names = a.prompts.split(",") if a.prompts else [p["name"] for p in d["prompts"]]
prompts = [p for p in d["prompts"] if p["name"] in names]
if len(prompts) != len(names):
    sys.exit(f"llamacpp-compare: {a.golden}: no prompt among {names}")
llm = llama_cpp.Llama(model_path=a.model, n_ctx=512, n_batch=512, n_threads=2, verbose=False,
                      logits_all=True, type_k=kvt, type_v=kvt, flash_attn=False)
bad = 0
for p in prompts:
    seq = p["prompt_ids"] + p["greedy_ids"]
    k0 = len(p["prompt_ids"])
    for way in a.ways.split(","):
        llm.reset()
        if way == "batch":
            llm.eval(seq)
        else:
            llm.eval(p["prompt_ids"])
            for t in p["greedy_ids"]:
                llm.eval([t])
        ref = np.array(llm.scores[:len(seq)], dtype=np.float32)
        opt = [] if way == "batch" else ["-p", str(k0)]
        out = subprocess.run([a.tool, "-t", "2", "-k", a.kv] + opt + [a.model, "-"] +
                             [str(t) for t in seq], capture_output=True, check=True).stdout
        ours = np.frombuffer(out, dtype=np.float32).reshape(len(seq), -1)
        diff = np.abs(ours[k0 - 1:] - ref[k0 - 1:]).max()
        line = f'{p["name"]} {way}: maxdiff {diff:.3g} over {len(seq) - k0 + 1} steps'
        ok = diff == 0 or not avx512
        for k in range(k0 - 1, len(seq)):
            ia, ib = int(ours[k].argmax()), int(ref[k].argmax())
            if ia != ib:
                m_ours = ours[k][ia] - ours[k][ib]
                m_ref = ref[k][ib] - ref[k][ia]
                line += (f'; step {k - k0 + 1}: ours {ia} llama.cpp {ib}, margin ours {m_ours:.4f}'
                         f' llama.cpp {m_ref:.4f}, diff at those {abs(ours[k][ia]-ref[k][ia]):.4f}'
                         f' {abs(ours[k][ib]-ref[k][ib]):.4f}')
                if m_ref < NEAR_TIE:
                    line += " (near tie)"
                else:
                    ok = False
                break
        bad += not ok
        print(line + ("" if ok else " FAIL"))
sys.exit(1 if a.check and bad else 0)
