#!/usr/bin/env python3
"""mv8-sass: instructions and loads per weight block in the hot loop of
cuda/matvec_q8.cu's k_mv8 / k_mv8s instances, from `cuobjdump -sass` of
build/cuda/matvec_q8.o (a review aid: no GPU needed).

  cuobjdump -sass build/cuda/matvec_q8.o > /tmp/mv8.sass
  tools/mv8-sass.py /tmp/mv8.sass

The hot loop is the largest loop holding dp4a (k_mv8s: the smallest, the
loop over a staged chunk); a weight block is 16 dp4a per input row for
NVFP4 (32 for m <= 2: its positive and negative parts), 8 for the others,
so blocks per trip = dp4a / (per-row count * M) (k_mv8/l2, two lanes a
block: half a block a trip, so the counts are a lane's times two, the same
issue slots).
Static counts of the loop body: branches not taken count too.
"""
import re
import sys

TYPES = {'8': 'Q8_0', '40': 'NVFP4', '3': 'Q4_1', '7': 'Q5_1'}


def main(path):
    text = open(path).read()
    rows = []
    for fn in re.split(r'\n\s*Function : ', text)[1:]:
        name = fn.split('\n', 1)[0].strip()
        m = re.match(r'_Z(5k_mv8|6k_mv8s)ILi(\d+)ELi(\d+)E(Li(\d)E)?', name)
        if not m or m.group(2) not in TYPES:
            continue
        lanes = m.group(5) if m.group(5) in ('2', '4') else ''  # NVFP4 by 2 or 4 lanes a block
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
        n, j, i = min(loops) if m.group(1) == '6k_mv8s' else max(loops)
        body = [t for _, t in ins[j:i + 1]]
        M = int(m.group(3))
        # dp4a a block and row: NVFP4 16, 32 for m <= 2 (mv8_fp4pn's two parts), others 8
        per = (32 if M <= 2 else 16) if m.group(2) == '40' else 8
        blocks = sum('IDP' in t for t in body) / (per * M)
        loads = sum(('LDG' in t or 'LDS' in t) for t in body)
        rows.append((TYPES[m.group(2)], m.group(1)[1:] + ('/l' + lanes if lanes else ''), M,
                     n / blocks, loads / blocks))
    for t, k, M, n, ld in sorted(rows):
        print('%-5s %-9s M=%-2d %7.1f instructions %5.1f loads a weight block' % (t, k, M, n, ld))


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: mv8-sass.py FILE.sass')
    main(sys.argv[1])
