#!/usr/bin/env python3
"""mv8-sass: instructions and loads per weight block in the hot loop of the
decode products' instances, from `cuobjdump -sass` of an object (a review
aid: no GPU needed; cuobjdump comes with the CUDA toolkit, or from PyPI's
nvidia-cuda-cuobjdump wheel): cuda/matvec_q8.cu's k_mv8 / k_mv8s (Q8_0,
NVFP4, Q4_0, Q4_1, Q5_0, Q5_1; /l2: two lanes a block), and
cuda/matvec_qk.cu's k_mvk (Q4_K, Q5_K, Q6_K; D = 2 or 4 blocks in flight,
or S: Q6_K's rows staged in shared memory; "Q6_K packed": GPU_T_Q6K_PACKED).

  cuobjdump -sass build/cuda/matvec_q8.o > /tmp/mv8.sass
  tools/mv8-sass.py /tmp/mv8.sass
  cuobjdump -sass build/cuda/matvec_qk.o > /tmp/mvk.sass
  tools/mv8-sass.py /tmp/mvk.sass

The hot loop is the largest loop holding dp4a (k_mv8s: the smallest, the
loop over a staged chunk).  k_mv8: a weight block is 16 dp4a per input row
for NVFP4 (32 for m <= 2: its positive and negative parts), 8 for the
others, so blocks per trip = dp4a / (per-row count * M) (k_mv8/l2, two
lanes a block: half a block a trip, so the counts are a lane's times two,
the same issue slots).  k_mvk: a lane's part of a super-block is 64 / L
dp4a per input row (8 a piece of 32 values); its columns are per block and
lane: instructions, narrow global loads (LDG: weights in place, the
input's q and dk), asynchronous copies (LDGSTS: staged rows), shared loads
(LDS).  Static counts of the loop body: branches not taken count too.
"""
import re
import sys

TYPES = {'8': 'Q8_0', '40': 'NVFP4', '2': 'Q4_0', '3': 'Q4_1', '6': 'Q5_0', '7': 'Q5_1'}
KTYPES = {'12': 'Q4_K', '13': 'Q5_K', '14': 'Q6_K', '114': 'Q6_K packed'}


def hot_loop(fn, smallest=False):
    """The ops of the largest (smallest) backward-branch loop holding dp4a, or None."""
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
        return None
    _, j, i = min(loops) if smallest else max(loops)
    return [t for _, t in ins[j:i + 1]]


def opcode(t):
    """An instruction's opcode without its predicate and modifiers."""
    return (t.split()[1] if t.startswith('@') else t.split()[0]).split('.')[0]


def main(path):
    text = open(path).read()
    rows, krows = [], []
    for fn in re.split(r'\n\s*Function : ', text)[1:]:
        name = fn.split('\n', 1)[0].strip()
        m = re.match(r'_Z(5k_mv8|6k_mv8s)ILi(\d+)ELi(\d+)E(Li(\d)E)?', name)
        k = re.match(r'_Z5k_mvkILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E', name)
        if m and m.group(2) in TYPES:
            body = hot_loop(fn, m.group(1) == '6k_mv8s')
            if body is None:
                continue
            lanes = m.group(5) if m.group(5) in ('2', '4') else ''  # NVFP4 by 2 or 4 lanes
            M = int(m.group(3))
            # dp4a a block and row: NVFP4 16, 32 for m <= 2 (mv8_fp4pn's two parts), others 8
            per = (32 if M <= 2 else 16) if m.group(2) == '40' else 8
            blocks = sum('IDP' in t for t in body) / (per * M)
            loads = sum(('LDG' in t or 'LDS' in t) for t in body)
            rows.append((TYPES[m.group(2)], m.group(1)[1:] + ('/l' + lanes if lanes else ''), M,
                         len(body) / blocks, loads / blocks))
        elif k and k.group(1) in KTYPES:
            body = hot_loop(fn)
            if body is None:
                continue
            M, L, D = int(k.group(2)), int(k.group(3)), int(k.group(4))
            ops = [opcode(t) for t in body]
            blocks = sum(op == 'IDP' for op in ops) / (64 / L * M)
            krows.append((KTYPES[k.group(1)], L, 'S' if D == 0 else 'D=%d' % D, M,
                          len(body) / blocks) + tuple(ops.count(o) / blocks
                                                      for o in ('LDG', 'LDGSTS', 'LDS')))
    for t, kn, M, n, ld in sorted(rows):
        print('%-5s %-9s M=%-2d %7.1f instructions %5.1f loads a weight block' % (t, kn, M, n, ld))
    for t, L, d, M, n, ldg, cp, lds in sorted(krows):
        print('%-4s L=%d %-3s M=%-2d %6.1f instructions %5.1f LDG %5.1f LDGSTS %5.1f LDS '
              'a block a lane' % (t, L, d, M, n, ldg, cp, lds))


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: mv8-sass.py FILE.sass')
    main(sys.argv[1])
