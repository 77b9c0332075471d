#!/usr/bin/env python3
"""mvk-sass: instructions and memory operations per super-block and lane in
the hot loop of cuda/matvec_qk.cu's k_mvk instances (Q4_K, Q5_K, Q6_K; D = 2
or 4 blocks in flight, or S: Q6_K's rows staged in shared memory), from
`cuobjdump -sass` of build/cuda/matvec_qk.o (a review aid, as mv8-sass.py is
for k_mv8: no GPU needed; cuobjdump comes with the CUDA toolkit, or from
PyPI's nvidia-cuda-cuobjdump wheel).

  cuobjdump -sass build/cuda/matvec_qk.o > /tmp/mvk.sass
  tools/mvk-sass.py /tmp/mvk.sass

The hot loop is the largest loop holding dp4a; a lane's part of a block is
64 / L dp4a per input row (8 a piece of 32 values), so blocks per trip =
dp4a / (64 / L * M).  Columns: instructions, narrow global loads (LDG: the
weights in place, and the input's q and dk), asynchronous copies (LDGSTS:
the staged rows) and shared loads (LDS), each per block a lane.  Static
counts of the loop body: branches not taken count too.
"""
import re
import sys

TYPES = {'12': 'Q4_K', '13': 'Q5_K', '14': 'Q6_K'}


def main(path):
    text = open(path).read()
    rows = []
    for fn in re.split(r'\n\s*Function : ', text)[1:]:
        name = fn.split('\n', 1)[0].strip()
        m = re.match(r'_Z5k_mvkILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E', name)
        if not m or m.group(1) not in TYPES:
            continue
        M, L, D = int(m.group(2)), int(m.group(3)), int(m.group(4))
        ins = [(int(a.group(1), 16), a.group(2))
               for a in re.finditer(r'/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;', fn)]
        at = {a: i for i, (a, _) in enumerate(ins)}
        loops = []
        for i, (a, s) in enumerate(ins):
            b = re.search(r'BRA\s+(0x[0-9a-f]+)', s)
            if b and int(b.group(1), 16) < a and int(b.group(1), 16) in at:
                j = at[int(b.group(1), 16)]
                if any('IDP' in t for _, t in ins[j:i + 1]):
                    loops.append((i - j + 1, j, i))
        if not loops:
            continue
        n, j, i = max(loops)
        body = [t.split()[1] if t.startswith('@') else t.split()[0] for _, t in ins[j:i + 1]]
        blocks = sum(op.startswith('IDP') for op in body) / (64 / L * M)
        count = lambda p: sum(op.split('.')[0] == p for op in body) / blocks
        rows.append((TYPES[m.group(1)], L, 'S' if D == 0 else 'D=%d' % D, M, n / blocks,
                     count('LDG'), count('LDGSTS'), count('LDS')))
    for t, L, d, M, n, ldg, cp, lds in sorted(rows):
        print('%-4s L=%d %-3s M=%-2d %6.1f instructions %5.1f LDG %5.1f LDGSTS %5.1f LDS '
              'a block a lane' % (t, L, d, M, n, ldg, cp, lds))


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: mvk-sass.py FILE.sass')
    main(sys.argv[1])
