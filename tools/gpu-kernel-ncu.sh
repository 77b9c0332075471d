#!/bin/sh
# gpu-kernel-ncu.sh TYPE [REGEX] [COUNT]: why a decode product runs at the
# speed it does.  Nsight Compute's sections (speed of light, memory workload,
# scheduler and warp-state statistics, instruction mix, occupancy) for the
# first COUNT (default 6) launches whose kernel name matches REGEX (default
# k_mvk|k_mv8) under `kernel-check -b -T TYPE` (its bench: the shapes 4096 x
# 4096, 12288 x 4096 and 4096 x 12288, the type's forms in their order).
# Read the type's product beside Q8_0's (k_mv8: about 80% of copy on the
# H100), e.g. `sh tools/gpu-kernel-ncu.sh Q6_K` and `sh tools/gpu-kernel-ncu.sh Q8_0`.
# Writes $OUT/ncu-TYPE.txt (the report) and prints its headline metrics;
# bin/kernel-check must be built (tools/gpu-run.sh builds it).
set -u
case ${1:-} in
''|-*) echo "usage: sh tools/gpu-kernel-ncu.sh TYPE [REGEX] [COUNT]" >&2; exit 2 ;;
esac
t=$1 re=${2:-k_mvk|k_mv8} n=${3:-6}
case $n in ''|*[!0-9]*|0) echo "gpu-kernel-ncu.sh: COUNT '$n': not a count" >&2; exit 2 ;; esac
OUT=${OUT:-$(mktemp -d)}
cd "$(dirname "$0")/.." || exit 2
command -v ncu >/dev/null 2>&1 || { echo "gpu-kernel-ncu.sh: ncu: not found" >&2; exit 1; }
[ -x bin/kernel-check ] || { echo "gpu-kernel-ncu.sh: bin/kernel-check: not built" >&2; exit 1; }
r=$OUT/ncu-$t.txt
# (the bench's graphs replay the same kernels: the first COUNT launches are
# the plain ones before each graph; the rest of the run is not profiled)
timeout 400 ncu --clock-control none -k "regex:$re" -c "$n" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section Occupancy \
    --section LaunchStats bin/kernel-check -b -T "$t" >"$r" 2>&1
rc=$?
echo "== ncu $t ($re, $n launches): rc=$rc, report $r"
grep -E '^  [a-z_]+<|^  void |Memory Throughput|DRAM Throughput|L1/TEX Hit Rate|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Registers Per Thread|Executed Ipc Active|Mem Busy|Max Bandwidth' "$r" | head -120
exit $rc
