#!/usr/bin/env python3
"""The character classes of lib/unicode equal those HF tokenizers' regexes use.

Usage: tok_unicode.py TOK_CLI

For every code point (surrogates excepted), membership in \\p{L}, \\p{N},
\\p{M}, \\p{P} and \\s is read off the reference by splitting the string of all
code points with Split(Regex(r'\\P{X}+'), 'removed'): what remains is the class.
Prints the first code point that differs per class; exit 0 when none does.
"""
import subprocess
import sys

from tokenizers import Regex, pre_tokenizers

FLAGS = {'L': 1, 'N': 2, 'M': 4, 'P': 8, 's': 16}
NOT = {'L': r'\P{L}+', 'N': r'\P{N}+', 'M': r'\P{M}+', 'P': r'\P{P}+', 's': r'\S+'}


def main():
    out = subprocess.run([sys.argv[1], 'classes'], capture_output=True, check=True).stdout.decode()
    mine = {k: set() for k in FLAGS}
    for line in out.splitlines():
        a, b, f = (int(x, 16) for x in line.split())
        for k, bit in FLAGS.items():
            if f & bit:
                mine[k].update(c for c in range(a, b + 1) if not 0xD800 <= c < 0xE000)
    every = ''.join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    bad = 0
    for k, pat in NOT.items():
        split = pre_tokenizers.Split(Regex(pat), behavior='removed')
        ref = {ord(c) for piece, _ in split.pre_tokenize_str(every) for c in piece}
        diff = sorted(ref ^ mine[k])
        if diff:
            bad += 1
            c = diff[0]
            print(f"class {k}: U+{c:04X} is {'in' if c in ref else 'not in'} the reference's class "
                  f"({len(diff)} code points differ)")
        else:
            print(f"class {k}: {len(ref)} code points agree")
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
