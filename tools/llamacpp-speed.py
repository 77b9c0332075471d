#!/usr/bin/env python3
"""llamacpp-speed.py MODEL.gguf N THREADS PROMPT: llama.cpp's (llama-cpp-python's)
CPU speed on a raw prompt, printed in run-gen's stats words so tools/abba can
pull the same figure out of both: the whole prompt in one eval (prefill), then
N greedy tokens one eval each (decode)."""
import sys
import time

import llama_cpp
import numpy as np

path, n, nt, text = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=nt,
                      n_threads_batch=nt, verbose=False)
toks = llm.tokenize(text.encode(), add_bos=True, special=True)
t0 = time.perf_counter()
llm.eval(toks)
t1 = time.perf_counter()
for _ in range(n):
    llm.eval([int(np.argmax(llm.scores[llm.n_tokens - 1]))])
t2 = time.perf_counter()
print(f"prompt tokens={len(toks)} prefill {len(toks) / (t1 - t0):.1f} tok/s, "
      f"decode {n / (t2 - t1):.1f} tok/s ({n} tokens)")
