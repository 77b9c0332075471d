"""llama_greedy.py MODEL.gguf N PROMPT...: llama.cpp's (llama-cpp-python's)
greedy continuation of each raw prompt (BOS added, special tokens parsed),
N tokens at most, ending before EOS; one line of ids per prompt."""
import sys

import llama_cpp
import numpy as np

path, n = sys.argv[1], int(sys.argv[2])
llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_threads=2, verbose=False, logits_all=True)
for text in sys.argv[3:]:
    toks = llm.tokenize(text.encode(), add_bos=True, special=True)
    llm.reset()
    llm.eval(toks)
    out = []
    for _ in range(n):
        t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        if t == llm.token_eos():
            break
        out.append(t)
        llm.eval([t])
    print(" ".join(map(str, out)))
