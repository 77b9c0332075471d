#!/usr/bin/env python3
"""Compare lib/tokenizer (through tok-cli) with HF tokenizers on a corpus.

Usage: tok_hf.py TOK_CLI TOKENIZER_JSON CORPUS_DIR [--hf HF_TOKENIZER_JSON] [--random-ids N]

TOKENIZER is what tok-cli loads (tokenizer.json, checkpoint dir or .gguf);
--hf names the reference's tokenizer.json when it differs (a GGUF vocabulary
converted by tools/gguf-to-tokenizer-json.py).  Every corpus file, read as
bytes and decoded with errors="replace" as the reference needs a str, plus a
file of every added token, is encoded four ways (special tokens parsed or
not, BOS/EOS added or not) and decoded back (plain, skipping special tokens,
and streamed id by id).  Ids must be equal; the first difference is reported
with its position and the surrounding tokens.  --random-ids N also decodes N
seeded random id sequences (half of the ids byte tokens <0xXX> when the
vocabulary has them: runs that are not UTF-8).  Exit 0 when all agree.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer


def run(cmd, data=None):
    r = subprocess.run(cmd, input=data, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"tok_hf: {' '.join(cmd)}: exit {r.returncode}: {r.stderr.decode(errors='replace')}")
    return r.stdout


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else -1


def main():
    args = sys.argv[1:]
    hf_path, n_random = None, 0
    if '--random-ids' in args:
        k = args.index('--random-ids')
        n_random = int(args[k + 1])
        del args[k:k + 2]
    if '--hf' in args:
        k = args.index('--hf')
        hf_path = args[k + 1]
        del args[k:k + 2]
    cli, tok_path, corpus = args
    if hf_path is None:
        hf_path = os.path.join(tok_path, 'tokenizer.json') if os.path.isdir(tok_path) else tok_path
    hf = Tokenizer.from_file(hf_path)

    files = sorted(os.path.join(corpus, f) for f in os.listdir(corpus) if f.endswith('.txt'))
    tmp = tempfile.mkdtemp()
    added = [t.content for t in hf.get_added_tokens_decoder().values()]
    sp = os.path.join(tmp, 'added-tokens.txt')
    with open(sp, 'w', encoding='utf-8') as f:
        f.write('x' + ' '.join(added) + ' y ' + ''.join(added) + '\n' + '\n'.join('a' + t + 'b' for t in added))
    files.append(sp)
    texts = [open(p, 'rb').read().decode('utf-8', errors='replace') for p in files]

    failures = 0
    ndocs = 0
    decode_ids = []
    for special in (False, True):
        for add in (False, True):
            flags = ('-s' if special else '') + ('a' if add and special else '-a' if add else '')
            cmd = [cli] + ([flags] if flags else []) + ['encode', tok_path] + files
            mine = run(cmd).decode().split('\n')
            hf.encode_special_tokens = not special
            for p, text, line in zip(files, texts, mine):
                ref = hf.encode(text, add_special_tokens=add).ids
                got = [int(x) for x in line.split()]
                ndocs += 1
                i = first_diff(ref, got)
                if i >= 0:
                    failures += 1
                    print(f"MISMATCH {os.path.basename(p)} (special={special} add={add}) at token {i}: "
                          f"ref {ref[max(0, i - 3):i + 4]} got {got[max(0, i - 3):i + 4]} "
                          f"(ref {len(ref)} tokens, got {len(got)}); "
                          f"ref pieces {[hf.id_to_token(t) for t in ref[max(0, i - 1):i + 3]]}")
                elif special and not add:
                    decode_ids.append((os.path.basename(p), ref))
    hf.encode_special_tokens = False
    decode_ids += random_ids(hf, n_random)
    failures += check_decode(cli, tok_path, hf, decode_ids, tmp)
    print(f"{ndocs} encodings and {len(decode_ids)} decodings compared, {failures} failures "
          f"({len(files)} files, vocab {hf.get_vocab_size()})")
    sys.exit(1 if failures else 0)


def random_ids(hf, n):
    """n seeded random id sequences, half byte tokens where there are any."""
    rng = random.Random(7)
    size = hf.get_vocab_size()
    vocab = hf.get_vocab()
    byte_ids = [vocab[f'<0x{b:02X}>'] for b in range(256) if f'<0x{b:02X}>' in vocab]
    docs = []
    for k in range(n):
        ids = [rng.choice(byte_ids) if byte_ids and rng.random() < 0.5 else rng.randrange(size)
               for _ in range(rng.randrange(1, 40))]
        docs.append((f'random-ids-{k}', ids))
    return docs


def check_decode(cli, tok_path, hf, docs, tmp):
    """Whole decodes (with and without special tokens) and streamed chunks."""
    paths = []
    for k, (_, ids) in enumerate(docs):
        paths.append(os.path.join(tmp, f'ids{k}.txt'))
        with open(paths[-1], 'w') as f:
            f.write(' '.join(map(str, ids)))
    bad = 0
    for skip in (False, True):
        got = run([cli] + (['-k'] if skip else []) + ['decode', tok_path] + paths).decode().split('\n')
        for (name, ids), line in zip(docs, got):
            ref = hf.decode(ids, skip_special_tokens=skip)
            mine = json.loads(line)
            if mine != ref:
                i = first_diff(ref, mine)
                print(f"DECODE MISMATCH {name} skip={skip} at char {i}: "
                      f"ref {ref[max(0, i - 5):i + 5]!r} got {mine[max(0, i - 5):i + 5]!r}")
                bad += 1
    got = run([cli, 'stream', tok_path] + paths).decode().split('\n')
    for (name, ids), line in zip(docs, got):
        chunks = json.loads(line)
        whole = hf.decode(ids, skip_special_tokens=False)
        if len(chunks) != len(ids) + 1 or ''.join(chunks) != whole:
            print(f"STREAM MISMATCH {name}: the chunks do not add up to the decoded text")
            bad += 1
        elif any('\ufffd' in c for c in chunks) and '\ufffd' not in whole:
            print(f"STREAM {name}: a chunk holds U+FFFD that the whole text does not")
            bad += 1
    return bad


if __name__ == '__main__':
    main()
