#!/usr/bin/env python3
"""sass-same: are two builds' kernels the same machine code?  Compares the
`cuobjdump -sass` listings of two objects function by function, each
instruction without its address and encoding (a review aid for changes
that must leave kernels alone: no GPU needed).

  cuobjdump -sass old/matvec_q8.o > /tmp/a.sass
  cuobjdump -sass build/cuda/matvec_q8.o > /tmp/b.sass
  tools/sass-same.py /tmp/a.sass /tmp/b.sass [--map 'REGEX=REPLACEMENT' ...]

--map rewrites B's function names (re.sub, in order) before matching,
for a template parameter added with a default: e.g. k_mv8's loads-only
flag, --map 'ELi0EEv7mv8_set=EEv7mv8_set'.  Prints a line per function of
A that differs or that B lacks, the functions only B has, and a count;
exit 0 when every function of A is in B with the same instructions.
"""
import re
import sys


def functions(path):
    out = {}
    for fn in re.split(r'\n\s*Function : ', open(path).read())[1:]:
        name = fn.split('\n', 1)[0].strip()
        out[name] = [re.sub(r'\s+', ' ', m.group(1))
                     for m in re.finditer(r'/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;', fn)]
    return out


def main(argv):
    maps, files = [], []
    i = 0
    while i < len(argv):
        if argv[i] == '--map' and i + 1 < len(argv) and '=' in argv[i + 1]:
            maps.append(argv[i + 1].split('=', 1))
            i += 2
        elif argv[i].startswith('-'):
            sys.exit('usage: sass-same.py A.sass B.sass [--map REGEX=REPLACEMENT ...]')
        else:
            files.append(argv[i])
            i += 1
    if len(files) != 2:
        sys.exit('usage: sass-same.py A.sass B.sass [--map REGEX=REPLACEMENT ...]')
    a, braw = functions(files[0]), functions(files[1])
    b = {}
    for name, body in braw.items():
        for rx, rep in maps:
            name = re.sub(rx, rep, name)
        b[name] = body
    same = bad = 0
    for name, body in a.items():
        if name not in b:
            print('only in A: %s' % name)
            bad += 1
        elif body != b[name]:
            print('differs:   %s (%d / %d instructions)' % (name, len(body), len(b[name])))
            bad += 1
        else:
            same += 1
    for name in b:
        if name not in a:
            print('only in B: %s' % name)
    print('%d of %d functions of A the same in B' % (same, len(a)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
