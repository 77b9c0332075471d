#!/bin/sh
# gpu-kernel-ncu.sh TAG REGEX COUNT CMD...: why a kernel runs at the speed it
# does.  Nsight Compute's sections (speed of light, memory workload,
# scheduler and warp-state statistics, instruction mix, occupancy, launch)
# for the first COUNT launches under CMD whose mangled name matches REGEX
# (a graph's kernels count one by one), into $OUT/ncu-TAG.txt; prints the
# headline metrics.  E.g. the 31B Q6_K decode product in place and staged,
# and Q8_0's beside them:
#   f=/tmp/memra-gguf/arch-31b-Q6_K.gguf   (GPU_ARCH_KEEP=1 gpu-arch-bench.sh's)
#   sh tools/gpu-kernel-ncu.sh q6k-place '_Z5k_mvkILi14ELi1ELi8ELi2E' 3 \
#       build/t/tools/model-bench -d cuda -c 1 -n 1 -r 1 -k 0 "$f"
#   MEMRA_CUDA_QK_STAGE=1 sh tools/gpu-kernel-ncu.sh q6k-staged \
#       '_Z5k_mvkILi14ELi1ELi8ELi0E' 3 build/t/tools/model-bench ... "$f"
#   sh tools/gpu-kernel-ncu.sh q8 '_Z5k_mv8ILi8ELi1E' 3 bin/kernel-check -b -T Q8_0
set -u
if [ $# -lt 4 ]; then
	echo "usage: sh tools/gpu-kernel-ncu.sh TAG REGEX COUNT CMD..." >&2
	exit 2
fi
tag=$1 re=$2 n=$3
shift 3
case $tag in ''|*[!A-Za-z0-9._-]*) echo "gpu-kernel-ncu.sh: TAG '$tag': letters, digits, . _ - only" >&2; exit 2 ;; esac
case $n in ''|*[!0-9]*|0) echo "gpu-kernel-ncu.sh: COUNT '$n': not a count" >&2; exit 2 ;; esac
OUT=${OUT:-$(mktemp -d)}
command -v ncu >/dev/null 2>&1 || { echo "gpu-kernel-ncu.sh: ncu: not found" >&2; exit 1; }
r=$OUT/ncu-$tag.txt
timeout 400 ncu --clock-control none --kernel-name-base mangled -k "regex:$re" -c "$n" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section Occupancy \
    --section LaunchStats "$@" >"$r" 2>&1
rc=$?
echo "== ncu $tag ($re, $n launches): rc=$rc, report $r"
grep -E '^  _Z|Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit Rate|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Registers Per Thread|Executed Ipc Active|Mem Busy|Max Bandwidth|Mem Pipes Busy' "$r" | head -120
exit $rc
