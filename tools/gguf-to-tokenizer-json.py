#!/usr/bin/env python3
"""Write the HF tokenizer.json equivalent to a GGUF's byte-level BPE vocabulary.

Usage: tools/gguf-to-tokenizer-json.py MODEL.gguf OUT.json

For the HF tokenizers peer when llama.cpp is not at hand.  The mapping is the
inverse of llama.cpp's converter: tokenizer.ggml.tokens are the vocab (ids by
index), tokenizer.ggml.merges in order are the merges (rank = index), tokens of
type 3 (control) become special added tokens and type 4 (user-defined)
non-special added tokens, and tokenizer.ggml.pre selects the pre-tokenizer
llama.cpp runs for that name (smollm: Digits(individual) + the GPT-2 regex;
gpt2: the GPT-2 regex; qwen2/qwen35/llama-bpe: their Split regexes).
add_bos_token / add_eos_token become a TemplateProcessing post-processor.
Only tokenizer.ggml.model "gpt2" is handled.
"""
import json
import os
import sys

from gguf import GGUFReader

QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3 = QWEN2.replace(r"|\p{N}|", r"|\p{N}{1,3}|")


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    if f.types[0].name == 'ARRAY':
        if f.types[1].name == 'STRING':
            return [bytes(f.parts[i]).decode('utf-8') for i in f.data]
        return [f.parts[i].tolist()[0] for i in f.data]
    v = f.parts[f.data[0]]
    return bytes(v).decode('utf-8') if f.types[0].name == 'STRING' else v.tolist()[0]


def bytelevel(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": use_regex}


def split(regex):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        bytelevel(False)]}


def pre_tokenizer(pre):
    if pre in ('smollm', 'starcoder', 'refact', 'command-r', 'codeshell', 'exaone'):
        return {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                      bytelevel(True)]}
    if pre in ('gpt2', 'gpt-2', 'mpt', 'olmo', 'jais'):
        return bytelevel(True)
    if pre in ('qwen2', 'deepseek-r1-qwen'):
        return split(QWEN2)
    if pre == 'qwen35':
        return split(QWEN35)
    if pre in ('llama-bpe', 'llama3'):
        return split(LLAMA3)
    sys.exit(f"gguf-to-tokenizer-json: pre-tokenizer '{pre}' is not handled")


def main():
    src, out = sys.argv[1], sys.argv[2]
    r = GGUFReader(src)
    if field(r, 'tokenizer.ggml.model') != 'gpt2':
        sys.exit("gguf-to-tokenizer-json: only tokenizer.ggml.model 'gpt2' is handled")
    tokens = field(r, 'tokenizer.ggml.tokens')
    types = field(r, 'tokenizer.ggml.token_type', [1] * len(tokens))
    merges = field(r, 'tokenizer.ggml.merges', [])
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": ty == 3} for i, (t, ty) in enumerate(zip(tokens, types))
             if ty in (3, 4)]
    post = None
    single = [{"Sequence": {"id": "A", "type_id": 0}}]
    if field(r, 'tokenizer.ggml.add_bos_token', False):
        single.insert(0, {"SpecialToken": {"id": tokens[field(r, 'tokenizer.ggml.bos_token_id')], "type_id": 0}})
    if field(r, 'tokenizer.ggml.add_eos_token', False):
        single.append({"SpecialToken": {"id": tokens[field(r, 'tokenizer.ggml.eos_token_id')], "type_id": 0}})
    if len(single) > 1:
        st = {s["SpecialToken"]["id"]: {"id": s["SpecialToken"]["id"], "ids": [tokens.index(s["SpecialToken"]["id"])],
                                        "tokens": [s["SpecialToken"]["id"]]} for s in single if "SpecialToken" in s}
        post = {"type": "TemplateProcessing", "single": single, "pair": single, "special_tokens": st}
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": pre_tokenizer(field(r, 'tokenizer.ggml.pre', 'default')),
        "post_processor": post, "decoder": bytelevel(True),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }
    tmp = out + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(doc, f, ensure_ascii=False)
    os.replace(tmp, out)


if __name__ == '__main__':
    main()
