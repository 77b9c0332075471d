#!/usr/bin/env python3
"""pdl-ptx-check: every kernel of the given PTX files waits for the kernel
before it (programmatic dependent launch, cuda/gpu_impl.cuh's pdl_wait) on
every path before it touches device memory, and releases its dependents
(pdl_trigger) after that wait.

  nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Icuda -Ilib -ptx \\
      -o /tmp/ops.ptx cuda/ops.cu
  python3 tools/pdl-ptx-check.py /tmp/*.ptx

Per entry: griddepcontrol.wait present and launch_dependents after it; no
ret/exit before the wait and no branch before it that lands past it (every
path, early exits included, waits); no global or generic load, store or
atomic before it (prefetches to L2 may come first), except k_mmq2's first
weight step (ld.global.nc of the weights, host-copied).  Prints one line
per problem and a count; exits 1 when there is any.
"""
import re
import sys

ACCESS = re.compile(r'\b(?:(?:ld|st|atom|red)\.(?!param|shared|local|const)\S+|cp\.async\.\S+)')
PRE_WAIT_OK = {'_Z6k_mmq2': {'ld.global.nc.u32', 'ld.global.nc.v4.u32', 'ld.global.nc.u16'}}


def check(path):
    bad, n = [], 0
    text = open(path).read()
    for e in re.split(r'\n\.visible \.entry ', text)[1:]:
        n += 1
        name = e.split('(')[0]
        body = e.split('\n}\n')[0]
        w = body.find('griddepcontrol.wait')
        t = body.find('griddepcontrol.launch_dependents')
        if w < 0:
            bad.append((name, 'no griddepcontrol.wait'))
            continue
        if t < w:
            bad.append((name, 'no launch_dependents after the wait'))
        pre = body[:w]
        if re.search(r'\b(ret|exit|trap);', pre):
            bad.append((name, 'an exit before the wait'))
        for m in re.finditer(r'\bbra(?:\.uni)?\s+(\$\w+);', pre):
            lab = body.find('\n' + m.group(1) + ':')
            if lab < 0 or lab > w:
                bad.append((name, 'a branch past the wait to ' + m.group(1)))
        ok = next((v for k, v in PRE_WAIT_OK.items() if name.startswith(k)), set())
        acc = sorted({m.group(0) for m in ACCESS.finditer(pre)} - ok)
        if acc:
            bad.append((name, 'memory before the wait: ' + ' '.join(acc[:4])))
    return n, bad


def main():
    if len(sys.argv) < 2:
        print('usage: pdl-ptx-check.py FILE.ptx ...', file=sys.stderr)
        return 2
    tot = nbad = 0
    for p in sys.argv[1:]:
        n, bad = check(p)
        tot += n
        nbad += len(bad)
        for name, why in bad:
            print('%s: %s: %s' % (p, name, why))
    print('%d kernels, %d problems' % (tot, nbad))
    return 1 if nbad else 0


if __name__ == '__main__':
    sys.exit(main())
