#!/usr/bin/env python3
"""llamacpp-compare.py MODEL.gguf GOLDEN.json [MODEL_LOGITS [f16|f32]]: our logits
(build/t/tools/model-logits) against llama.cpp's (llama-cpp-python) along
llama.cpp's greedy path of each golden prompt, computed both ways llama.cpp
computes them: the whole sequence in one batch ("batch"), and the prompt in
one batch then one token at a time as generation runs ("gen"; llama.cpp's
kernels for one row sum in other orders than its batched ones).  Prints,
per prompt and way, the largest logit difference, the first position where
the argmaxes differ, and there both sides' top-2 margins: a near tie is a
margin smaller than the difference between the two implementations.  Both
sides use the KV cache type given (f16, llama.cpp's default, when none)."""
import json
import subprocess
import sys

import llama_cpp
import numpy as np

path, golden = sys.argv[1], sys.argv[2]
tool = sys.argv[3] if len(sys.argv) > 3 else "build/t/tools/model-logits"
kv = sys.argv[4] if len(sys.argv) > 4 else "f16"
kvt = {"f32": 0, "f16": 1}[kv]
d = json.load(open(golden))
llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=2, verbose=False,
                      logits_all=True, type_k=kvt, type_v=kvt, flash_attn=False)
for p in d["prompts"]:
    seq = p["prompt_ids"] + p["greedy_ids"]
    k0 = len(p["prompt_ids"])
    for way in ("batch", "gen"):
        llm.reset()
        if way == "batch":
            llm.eval(seq)
        else:
            llm.eval(p["prompt_ids"])
            for t in p["greedy_ids"]:
                llm.eval([t])
        ref = np.array(llm.scores[:len(seq)], dtype=np.float32)
        opt = [] if way == "batch" else ["-p", str(k0)]
        out = subprocess.run([tool, "-t", "2", "-k", kv] + opt + [path, "-"] + [str(t) for t in seq],
                             capture_output=True, check=True).stdout
        ours = np.frombuffer(out, dtype=np.float32).reshape(len(seq), -1)
        diff = np.abs(ours[k0 - 1:] - ref[k0 - 1:]).max()
        line = f'{p["name"]} {way}: maxdiff {diff:.3g} over {len(seq) - k0 + 1} steps'
        for k in range(k0 - 1, len(seq)):
            a, b = int(ours[k].argmax()), int(ref[k].argmax())
            if a != b:
                m_ours = ours[k][a] - ours[k][b]
                m_ref = ref[k][b] - ref[k][a]
                line += (f'; step {k - k0 + 1}: ours {a} llama.cpp {b}, margin ours {m_ours:.4f}'
                         f' llama.cpp {m_ref:.4f}, diff at those {abs(ours[k][a]-ref[k][a]):.4f}'
                         f' {abs(ours[k][b]-ref[k][b]):.4f}')
                break
        print(line)
