#!/usr/bin/env python3
"""Compare lib/tokenizer (through tok-cli) with llama.cpp's tokenizer on a GGUF.

Usage: tok_llama.py TOK_CLI MODEL.gguf CORPUS_DIR [--encode-only]

The peer is llama-cpp-python (Llama(vocab_only=True)).  Every corpus file is
read as bytes and its ill-formed UTF-8 replaced by U+FFFD first (the policy
lib/tokenizer documents; llama.cpp itself would see the raw bytes), plus a
file of every control and user-defined token; each is encoded with special
tokens parsed or not and BOS/EOS added or not, and decoded back with special
tokens rendered (llama_token_to_piece per token, concatenated: llama.cpp's
streaming path; llama_detokenize would also apply its clean_spaces rules).
The first differing id is reported.  Exit 0 when all agree.  --encode-only
skips the decoding (for SPM vocabularies with a space prefix lib/tokenizer
drops the text's first space, as llama_detokenize and HF do, which the
concatenated pieces keep).
"""
import json
import os
import subprocess
import sys
import tempfile

import ctypes

import llama_cpp
from llama_cpp import Llama


def run(cmd):
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"tok_llama: {' '.join(cmd)}: exit {r.returncode}: {r.stderr.decode(errors='replace')}")
    return r.stdout.decode()


def pieces(llm, ids):
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    buf = ctypes.create_string_buffer(4096)
    out = b''
    for t in ids:
        n = llama_cpp.llama_token_to_piece(vocab, t, buf, len(buf), 0, True)
        out += buf.raw[:n]
    return out


def main():
    args = [a for a in sys.argv[1:] if a != '--encode-only']
    encode_only = len(args) != len(sys.argv) - 1
    cli, gguf, corpus = args
    llm = Llama(model_path=gguf, vocab_only=True, verbose=False)
    tmp = tempfile.mkdtemp()
    files = []
    for f in sorted(os.listdir(corpus)):
        if f.endswith('.txt'):
            p = os.path.join(tmp, f)
            with open(p, 'wb') as o:
                o.write(open(os.path.join(corpus, f), 'rb').read().decode('utf-8', 'replace').encode())
            files.append(p)
    n_vocab = llm.n_vocab()
    specials = []
    for i in range(n_vocab):
        attr = llm._model.token_get_attr(i) if hasattr(llm._model, 'token_get_attr') else 0
        if attr & (8 | 16):     # LLAMA_TOKEN_ATTR_CONTROL | USER_DEFINED
            specials.append(llm.detokenize([i], special=True))
    sp = os.path.join(tmp, 'added-tokens.txt')
    with open(sp, 'wb') as o:
        o.write(b'x' + b' '.join(specials[:2000]) + b' y\n' + b''.join(specials[:2000]))
    files.append(sp)
    texts = [open(p, 'rb').read() for p in files]
    fails, n = 0, 0
    for special in (False, True):
        for add in (False, True):
            flags = ('-s' if special else '') + ('a' if add and special else '-a' if add else '')
            mine = run([cli] + ([flags] if flags else []) + ['encode', gguf] + files).split('\n')
            for p, text, line in zip(files, texts, mine):
                ref = llm.tokenize(text, add_bos=add, special=special)
                got = [int(x) for x in line.split()]
                n += 1
                if ref != got:
                    i = next((k for k, (a, b) in enumerate(zip(ref, got)) if a != b), min(len(ref), len(got)))
                    print(f"MISMATCH {os.path.basename(p)} (special={special} add={add}) at token {i}: "
                          f"ref {ref[max(0, i - 3):i + 4]} got {got[max(0, i - 3):i + 4]} "
                          f"(ref {len(ref)}, got {len(got)})")
                    fails += 1
                elif special and not add and not encode_only:
                    idf = p + '.ids'
                    with open(idf, 'w') as o:
                        o.write(' '.join(map(str, ref)))
                    want = pieces(llm, ref).decode('utf-8', 'replace')
                    got_text = json.loads(run([cli, 'decode', gguf, idf]))
                    if want != got_text:
                        k = next((k for k, (a, b) in enumerate(zip(want, got_text)) if a != b), 0)
                        print(f"DECODE MISMATCH {os.path.basename(p)} at char {k}: "
                              f"ref {want[max(0, k - 5):k + 5]!r} got {got_text[max(0, k - 5):k + 5]!r}")
                        fails += 1
    print(f"{n} encodings compared, {fails} failures ({len(files)} files, vocab {n_vocab}, "
          f"{len(specials)} added tokens)")
    sys.exit(1 if fails else 0)


if __name__ == '__main__':
    main()
