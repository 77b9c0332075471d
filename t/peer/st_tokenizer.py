#!/usr/bin/env python3
"""st_tokenizer.py CHECKPOINT KV.json: check the tokenizer.* metadata lib/safetensors plans
(KV.json = `st-dump --tokenizer --kvjson CHECKPOINT`) against llama.cpp's own rules run in
Python: tokens and token types as convert_hf_to_gguf.py's get_vocab_base builds them (vocab
from the `tokenizers` package), merges / special ids / add_*_token / chat_template from
gguf-py's SpecialVocab.  Prints each difference and a closing count; exits 1 on any.
"""
import json, os, sys

import gguf
from tokenizers import Tokenizer


def looks_special(t):
    return (t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (t.startswith("<|") and t.endswith("|>"))
            or (t.startswith("<\uff5c") and t.endswith("\uff5c>")) or (t.startswith("<unused") and t.endswith(">")))


def expected(ckpt):
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    n_vocab = cfg.get("text_config", {}).get("vocab_size", cfg.get("vocab_size"))
    tok = Tokenizer.from_file(os.path.join(ckpt, "tokenizer.json"))
    rev = {i: t for t, i in tok.get_vocab(with_added_tokens=True).items()}
    added = tok.get_added_tokens_decoder()
    tokens, types = [], []
    for i in range(n_vocab):
        if i not in rev:
            tokens.append(f"[PAD{i}]"); types.append(gguf.TokenType.UNUSED)
            continue
        t = rev[i]
        if i in added:
            if added[i].special or looks_special(t):
                types.append(gguf.TokenType.CONTROL)
            else:
                t = t.replace("\u2581", " "); types.append(gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
        tokens.append(t)
    want = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": [int(x) for x in types]}
    sv = gguf.SpecialVocab(ckpt, load_merges=True, n_vocab=n_vocab)
    want["tokenizer.ggml.merges"] = sv.merges
    keys = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "sep": "seperator_token_id",
            "pad": "padding_token_id", "cls": "cls_token_id", "mask": "mask_token_id"}
    for typ, tid in sv.special_token_ids.items():
        want["tokenizer.ggml." + keys[typ]] = tid
    for typ, v in sv.add_special_token.items():
        want[f"tokenizer.ggml.add_{typ}_token"] = v
    ct = sv.chat_template
    if isinstance(ct, list):
        ct = next(x["template"] for x in ct if x["name"] == "default")
    if ct is not None:
        want["tokenizer.chat_template"] = ct
    return want


def main():
    ckpt, kvfile = sys.argv[1:3]
    got = {k: v for k, v in json.load(open(kvfile)).items() if k.startswith("tokenizer.")}
    want = expected(ckpt)
    fails = 0
    for k in sorted(set(got) | set(want)):
        if k == "tokenizer.ggml.pre":
            continue
        if k not in got or k not in want or got[k] != want[k]:
            g, w = got.get(k, "(absent)"), want.get(k, "(absent)")
            if isinstance(g, list) and isinstance(w, list) and len(g) == len(w):
                i = next(i for i in range(len(g)) if g[i] != w[i])
                g, w = f"[{i}] {g[i]!r}", f"[{i}] {w[i]!r}"
            print(f"{k}: got {str(g)[:200]}, want {str(w)[:200]}")
            fails += 1
    print(f"{len(want)} keys, {fails} differences")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
