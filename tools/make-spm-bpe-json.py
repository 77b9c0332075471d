#!/usr/bin/env python3
"""Write t/data/spm-bpe/tokenizer.json: a small SentencePiece-style BPE
tokenizer.json laid out as Llama-2 checkpoints ship theirs.

Usage: tools/make-spm-bpe-json.py [OUT_JSON]

Model BPE with byte_fallback and fuse_unk; ids 0..2 are <unk> <s> </s>
(added, special, not normalized), ids 3..258 the byte tokens <0x00>..<0xFF>,
then the trained pieces; normalizer Sequence[Prepend("▁"), Replace(" ", "▁")],
no pre-tokenizer, decoder Sequence[Replace("▁", " "), ByteFallback, Fuse,
Strip(" ", 1, 0)], post-processor "<s> $A".  The pieces are trained here (plain
BPE, deterministic) on the tokenizer test corpus plus some generated text,
split at "▁" as SentencePiece does, with an alphabet of the 150 commonest
characters so that rarer ones (CJK, emoji) take the byte fallback.
"""
import collections
import os
import sys

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECIALS = ['<unk>', '<s>', '</s>']


def corpus():
    d = os.path.join(TOP, 't', 'data', 'tok-corpus')
    texts = [open(os.path.join(d, f), 'rb').read().decode('utf-8', 'replace')
             for f in sorted(os.listdir(d)) if f.endswith('.txt')]
    words = 'the of and to in is was for on that with as by at from his her they it be this'.split()
    texts += [' '.join(words[(i * 7 + k * 3) % len(words)] for k in range(12)) + '.' for i in range(400)]
    return texts


def train(n_merges=2500, n_alpha=150):
    """Plain BPE training, deterministic: the commonest pair merges first
    (ties: the smaller pair), words split at U+2581 as SentencePiece splits."""
    words = collections.Counter()
    for text in corpus():
        for w in ('\u2581' + text.replace(' ', '\u2581')).split('\u2581')[1:]:
            words['\u2581' + w] += 1
    chars = collections.Counter()
    for w, n in words.items():
        for c in w:
            chars[c] += n
    alpha = sorted(c for c, _ in sorted(chars.items(), key=lambda kv: (-kv[1], kv[0]))[:n_alpha])
    known = set(alpha)
    # a character outside the alphabet ends a run: runs are what merges see
    runs = collections.Counter()
    for w, n in words.items():
        for r in ''.join(c if c in known else '\0' for c in w).split('\0'):
            if len(r) > 1:
                runs[tuple(r)] += n
    vocab, merges = list(alpha), []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for r, n in runs.items():
            for i in range(len(r) - 1):
                pairs[r[i], r[i + 1]] += n
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if best[1] < 2:
            break
        (a, b), new = best[0], best[0][0] + best[0][1]
        merges.append((a, b))
        if new not in vocab:
            vocab.append(new)
        nxt = collections.Counter()
        for r, n in runs.items():
            out, i = [], 0
            while i < len(r):
                if i + 1 < len(r) and r[i] == a and r[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(r[i])
                    i += 1
            nxt[tuple(out)] += n
        runs = nxt
    return vocab, merges


def build(vocab, merges):
    ids = {s: i for i, s in enumerate(SPECIALS + [f'<0x{b:02X}>' for b in range(256)])}
    for piece in vocab:
        ids.setdefault(piece, len(ids))
    t = Tokenizer(models.BPE(ids, merges, unk_token='<unk>', byte_fallback=True, fuse_unk=True))
    t.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    t.normalizer = normalizers.Sequence([normalizers.Prepend('\u2581'), normalizers.Replace(' ', '\u2581')])
    t.decoder = decoders.Sequence([decoders.Replace('\u2581', ' '), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(' ', 1, 0)])
    t.post_processor = processors.TemplateProcessing(single='<s> $A', pair='<s> $A <s> $B',
                                                     special_tokens=[('<s>', 1)])
    return t


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(TOP, 't', 'data', 'spm-bpe', 'tokenizer.json')
    os.makedirs(os.path.dirname(out), exist_ok=True)
    t = build(*train())
    with open(out, 'w', encoding='utf-8') as f:
        f.write(t.to_str(pretty=False) + '\n')
    print(f'{out}: {t.get_vocab_size()} tokens')


if __name__ == '__main__':
    main()
