#!/usr/bin/env python3
"""unicode_nfc equals the NFC normalizer of HF tokenizers.

Usage: tok_nfc.py TOK_CLI

Inputs: every code point alone (surrogates and line breaks excepted), every
code point followed by U+0301 and by U+0323 U+0301 U+0302 (out of canonical
order), every Hangul L+V and LV+T jamo pair, and a list of tricky strings.
Prints the first line that differs; exit 0 when none does.  (The reference's
normalizer has Unicode 9.0 data: Python's unicodedata2 16.0 differs from it on
marks added since, e.g. U+1DF6, so it is not the oracle here.)
"""
import subprocess
import sys

from tokenizers import normalizers


def cases():
    cps = [c for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000 and c not in (0xA, 0xD)]
    yield from (chr(c) for c in cps)
    yield from (chr(c) + '\u0301' for c in cps if c < 0x20000)
    yield from (chr(c) + '\u0323\u0301\u0302' for c in cps if c < 0x20000)
    for v in range(0x1161, 0x1176):
        yield from (chr(l) + chr(v) + ' ' + chr(l) + chr(v) + '\u11a8' for l in range(0x1100, 0x1113))
    for t in range(0x11a7, 0x11c4):
        yield '\uac00' + chr(t) + '\uac1c' + chr(t) + '\ud7a3' + chr(t)
    yield from ['e\u0301', 'caf\u00e9 cafe\u0301', 'a\u0328\u0301', '\u1e9b\u0323', 'q\u0307\u0323',
                '\u0344', '\u0958', '\u2126', 'A\u030a\u212b', '\u0b47\u0b3e\u0b57',
                '\u0301e', '\u1100\u1161\u11a8\u11a8', '\u1100\u0301\u1161',
                'x\u0315\u0300\u05ae\u0300b', '\U0001d15e\U0001d165', '\u00c5\u0327\u0301',
                '\u0fb3\u0f71\u0f80', 'ﬁ ①', '\u30ab\u3099 \u304b\u309a', '\U000110a5\U000110ba']


def main():
    lines = list(cases())
    got = subprocess.run([sys.argv[1], 'nfc'], input='\n'.join(lines).encode() + b'\n',
                         capture_output=True, check=True).stdout.decode().split('\n')[:-1]
    refs = [('tokenizers', normalizers.NFC().normalize_str)]
    bad = 0
    for name, ref in refs:
        for i, s in enumerate(lines):
            if got[i] != ref(s):
                print(f"{name}: line {i + 1} {ascii(s)}: got {ascii(got[i])}, want {ascii(ref(s))}")
                bad += 1
                break
        else:
            print(f"{name}: {len(lines)} strings agree")
    sys.exit(1 if bad or len(got) != len(lines) else 0)


if __name__ == '__main__':
    main()
