#!/bin/sh
# gpu-run.sh: the one script a device run calls.  Builds for sm_90, runs
# kernel-check, its self-test and the matvec bandwidth benchmark; full logs
# go to $OUT (or a temporary directory), a short table is printed last.
#   usage: sh tools/gpu-run.sh [bench]      ("bench": skip the checks)
set -u
OUT=${OUT:-$(mktemp -d)}
cd "$(dirname "$0")/.." || exit 2
mode=${1:-all}

{ date -u; nvidia-smi; nvcc --version; } >"$OUT/device.txt" 2>&1
echo "== build (logs in $OUT)"
t0=$(date +%s)
if ! make CUDA=1 CUDA_ARCH=90 -j16 >"$OUT/build.log" 2>&1; then
	tail -40 "$OUT/build.log"
	exit 1
fi
echo "built in $(( $(date +%s) - t0 ))s"
kc=- st=- kc2=-
if [ "$mode" != bench ]; then
	bin/kernel-check >"$OUT/kernel-check.log" 2>&1; kc=$?
	MEMRA_KC_BREAK=1 bin/kernel-check --self-test >"$OUT/self-test.log" 2>&1; st=$?
fi
t0=$(date +%s)
bin/kernel-check --bench >"$OUT/bench.log" 2>&1; bc=$?
echo "bench in $(( $(date +%s) - t0 ))s"
if [ "$mode" != bench ]; then
	# the checks again with short chunks (more chunks per row), and a chunk sweep
	bin/kernel-check -C 512 -U 2 >"$OUT/kernel-check-c512.log" 2>&1; kc2=$?
	{
		bin/kernel-check -b -U 2
		for t in Q4_K Q8_0 NVFP4 F16; do
			bin/kernel-check -b -T $t -C 1024 -U 2
		done
	} >"$OUT/bench-chunk.log" 2>&1
fi
if [ "$mode" != bench ] && [ "${GPU_RUN_NCU:-1}" = 1 ] && command -v ncu >/dev/null 2>&1; then
	# one Q4_K 4096x4096 m=1 product under the profiler (clocks left alone)
	timeout 120 ncu --clock-control none --set full -k regex:k_matvec -c 1 \
	    bin/kernel-check --bench -T Q4_K >"$OUT/ncu-q4k.txt" 2>&1
fi

if [ "$mode" != bench ]; then
	echo "== kernel-check: every line that is not OK"
	grep -v ' OK$' "$OUT/kernel-check.log" | tail -60
	echo "== self-test"
	tail -3 "$OUT/self-test.log"
fi
echo "== bench (m=1 and m=4; all in bench.log)"
grep -E '^bench (device|copy)' "$OUT/bench.log"
grep -E '^bench .* m=(1|4) ' "$OUT/bench.log" | sed 's/^bench //'
tail -3 "$OUT/bench.log" | grep -v '^bench' || true
if [ -f "$OUT/bench-chunk.log" ]; then
	echo "== unroll 2 / chunk sweep, m=1 (kernel-check -C 512 -U 2: exit $kc2, $(tail -1 "$OUT/kernel-check-c512.log"))"
	grep -E '^bench (chunk|.* m=1 )' "$OUT/bench-chunk.log" | sed 's/^bench //'
fi
if [ -f "$OUT/ncu-q4k.txt" ]; then
	echo "== ncu, Q4_K 4096x4096 m=1"
	grep -E "^ +(Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Issue Slots Busy|No Eligible|Block Limit (Registers|Shared Mem)) " \
	    "$OUT/ncu-q4k.txt" | head -14
fi
echo "kernel-check=$kc self-test=$st bench=$bc"
