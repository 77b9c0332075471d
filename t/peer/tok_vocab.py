#!/usr/bin/env python3
"""Run llama.cpp's tokenizer test vectors (models/ggml-vocab-*.gguf) through tok-cli.

Usage: tok_vocab.py TOK_CLI MODELS_DIR

Each ggml-vocab-NAME.gguf comes with NAME.gguf.inp (texts separated by
"\\n__ggml_vocab_test__\\n") and NAME.gguf.out (the expected ids of each text,
one line each, without BOS/EOS, special tokens not parsed: llama.cpp's
test-tokenizer-0).  Prints one line per vocabulary:
  NAME: ok, N texts
  NAME: refused: MESSAGE          (tok-cli could not load it)
  NAME: text K, token P: got ..., want ...   (the first difference)
  NAME: loads (no test vectors)
Exit 0 whatever the outcome; the caller asserts the lines.

These vocabulary-only files end right after their header, without the
padding to the 32-byte alignment that ggml writes before the (here empty)
data section and lib/gguf insists on; tok-cli reads a copy padded with zeros.
"""
import glob
import os
import subprocess
import sys
import tempfile

SEP = '\n__ggml_vocab_test__\n'


def padded(gguf, tmp):
    with open(gguf, 'rb') as f:
        data = f.read()
    p = os.path.join(tmp, os.path.basename(gguf))
    with open(p, 'wb') as f:
        f.write(data + b'\0' * (-len(data) % 32))
    return p


def check(cli, orig, tmp):
    name = os.path.basename(orig)[len('ggml-vocab-'):-len('.gguf')]
    gguf = padded(orig, tmp)
    if not os.path.exists(orig + '.inp'):
        r = subprocess.run([cli, 'encode', gguf, '/dev/null'], capture_output=True)
        if r.returncode != 0:
            return f"{name}: refused: {r.stderr.decode(errors='replace').strip()}"
        return f"{name}: loads (no test vectors)"
    with open(orig + '.inp', encoding='utf-8') as f:
        texts = f.read().split(SEP)
    with open(orig + '.out', encoding='utf-8') as f:
        want = [line.split() for line in f.read().split('\n')[:len(texts)]]
    if texts and texts[-1].endswith('\n'):
        texts[-1] = texts[-1][:-1]
    files = []
    for i, t in enumerate(texts):
        p = os.path.join(tmp, f"{name}-{i}.txt")
        with open(p, 'wb') as f:
            f.write(t.encode())
        files.append(p)
    r = subprocess.run([cli, 'encode', gguf] + files, capture_output=True)
    if r.returncode != 0:
        return f"{name}: refused: {r.stderr.decode(errors='replace').strip()}"
    got = [line.split() for line in r.stdout.decode().split('\n')[:len(texts)]]
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            p = next((k for k in range(min(len(g), len(w))) if g[k] != w[k]), min(len(g), len(w)))
            return (f"{name}: text {i + 1} {ascii(texts[i][:40])}, token {p}: got {' '.join(g[p:p + 5])}, "
                    f"want {' '.join(w[p:p + 5])}")
    return f"{name}: ok, {len(texts)} texts"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for gguf in sorted(glob.glob(os.path.join(sys.argv[2], 'ggml-vocab-*.gguf'))):
            print(check(sys.argv[1], gguf, tmp), flush=True)


if __name__ == '__main__':
    main()
