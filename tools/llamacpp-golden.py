#!/usr/bin/env python3
"""llamacpp-golden.py MODEL.gguf OUT.json [f32|f16]: record llama.cpp's greedy ids on
the SmolLM2 GGUF (through llama-cpp-python) for a fixed set of prompts, so
CI, which cannot build llama-cpp-python (about an hour from source), can
compare run-gen with llama.cpp.

Per prompt: the text given to the tokenizer (chat prompts are already
rendered with the GGUF's ChatML template), llama.cpp's prompt ids (BOS as
the vocabulary asks, special tokens parsed), up to N greedy ids (stopping
before EOS or <|im_end|>), and the top-5 logits of the first step with the
top-2 margin.  The KV cache is F16 by default, llama.cpp's own default
(run-gen --kv-type f16 is the same; f32 makes t/data/smollm2-llamacpp-f32.json,
which run-gen's default cache matches), no flash attention.  Settings: n_ctx 512, n_batch 512, 2 threads, logits of every
position, whole prompt in one eval, then one token per eval.
"""
import hashlib
import json
import os
import sys

import llama_cpp
import numpy as np

N = 32
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chat(user):
    return ("<|im_start|>system\n" + SYSTEM + "<|im_end|>\n<|im_start|>user\n" + user +
            "<|im_end|>\n<|im_start|>assistant\n")


PROMPTS = [
    ("raw-prose", "The capital of France is"),
    ("raw-story", "Once upon a time, in a small village by the sea,"),
    ("raw-code-add", "def add(a, b):"),
    ("raw-code-c", "#include <stdio.h>\n\nint main(void)\n{\n"),
    ("raw-list", "1, 2, 3, 4, 5, "),
    ("chat-math", chat("What is 2+2?")),
    ("chat-code", chat("Write a Python function that reverses a string.")),
    ("chat-prose", chat("Describe the moon in two sentences.")),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def main():
    path, out = sys.argv[1], sys.argv[2]
    kv = sys.argv[3] if len(sys.argv) > 3 else "f16"
    kvt = {"f32": 0, "f16": 1}[kv]
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=2,
                          verbose=False, logits_all=True, type_k=kvt, type_v=kvt,
                          flash_attn=False)
    stops = {llm.token_eos()}
    im_end = llm.tokenize(b"<|im_end|>", add_bos=False, special=True)
    if len(im_end) == 1:
        stops.add(im_end[0])
    res = []
    for name, text in PROMPTS:
        toks = llm.tokenize(text.encode(), add_bos=True, special=True)
        llm.reset()
        llm.eval(toks)
        first = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        top = np.argsort(-first, kind="stable")[:5]
        ids = []
        for _ in range(N):
            t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            if t in stops:
                break
            ids.append(t)
            llm.eval([t])
        res.append({
            "name": name, "text": text, "prompt_ids": [int(t) for t in toks],
            "greedy_ids": ids, "stopped": len(ids) < N,
            "top5_ids": [int(t) for t in top], "top5_logits": [float(first[t]) for t in top],
            "top2_margin": float(first[top[0]] - first[top[1]]),
        })
    doc = {
        "llama_cpp_python": llama_cpp.__version__,
        "model": os.path.basename(path), "model_sha256": sha256(path),
        "settings": {"n_ctx": 512, "n_batch": 512, "n_threads": 2, "logits_all": True,
                     "type_k": kv, "type_v": kv, "flash_attn": False,
                     "add_bos": True, "special": True, "max_new": N, "sampling": "argmax",
                     "stop_ids": sorted(stops), "prompt_eval": "one llm.eval of the whole prompt"},
        "prompts": res,
    }
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
