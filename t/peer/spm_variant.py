#!/usr/bin/env python3
"""Rewrite the SentencePiece-style BPE fixture (t/data/spm-bpe/tokenizer.json)
into another layout that checkpoints ship, or break one part of it.

Usage: spm_variant.py SRC DST KIND

KIND: gemma (normalizer Replace only, decoder without Strip, no post-processor),
SCHEME-split / SCHEME-nosplit (no normalizer, a Metaspace pre-tokenizer with
prepend_scheme SCHEME: always, first or never), or one of the breakages that
lib/tokenizer refuses: metaspace-decoder, no-byte-fallback, missing-byte,
strip-2, replace-other, normalized-added, whitespace-pre.
"""
import json
import sys

src, dst, kind = sys.argv[1:]
t = json.load(open(src))
dec4 = t['decoder']
if kind == 'metaspace-decoder':
    t['decoder'] = {'type': 'Metaspace', 'replacement': '\u2581', 'prepend_scheme': 'always', 'split': True}
elif kind == 'no-byte-fallback':
    t['model']['byte_fallback'] = False
elif kind == 'missing-byte':
    v = t['model']['vocab']
    v['<0x7F>x'] = v.pop('<0x7F>')
elif kind == 'strip-2':
    t['decoder']['decoders'][3]['start'] = 2
elif kind == 'replace-other':
    t['normalizer']['normalizers'][1]['content'] = '_'
elif kind == 'normalized-added':
    t['added_tokens'][1]['normalized'] = True
elif kind == 'whitespace-pre':
    t['pre_tokenizer'] = {'type': 'Whitespace'}
elif kind == 'gemma':
    t['normalizer'] = {'type': 'Replace', 'pattern': {'String': ' '}, 'content': '\u2581'}
    t['decoder'] = {'type': 'Sequence', 'decoders': dec4['decoders'][:3]}
    t['post_processor'] = None
else:
    scheme, split = kind.split('-')
    t['normalizer'] = None
    t['pre_tokenizer'] = {'type': 'Metaspace', 'replacement': '\u2581', 'prepend_scheme': scheme,
                          'split': split == 'split'}
json.dump(t, open(dst, 'w'), ensure_ascii=False)
