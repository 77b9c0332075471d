#!/bin/sh
# gpu-profile.sh: where a decode step of the 9B-shape random GGUF spends its
# time.  Wall time per step (model-bench), then GPU time per kernel from ncu
# (one metric, gpu__time_duration.sum) over a 1-token prefill and 1 decode
# step, summed per kernel name; also nsys's summary where nsys exists.
#   usage: sh tools/gpu-profile.sh [TYPE]   (TYPE: NVFP4 (default) or Q8_0)
# Logs go to $OUT (or a temporary directory).
set -u
OUT=${OUT:-$(mktemp -d)}
cd "$(dirname "$0")/.." || exit 2
q=${1:-NVFP4}
G=${TMPDIR:-/tmp}/memra-gguf
f=$G/qwen35-9b-random-$q.gguf
mkdir -p "$G"
t0=$(date +%s)
make CUDA=1 CUDA_ARCH=90 -j16 build/t/tools/gguf-random build/t/tools/model-bench \
    >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
echo "built in $(( $(date +%s) - t0 ))s"
build/t/tools/gguf-random -p 9b -t "$q" "$f" >/dev/null 2>&1 || { echo "gguf-random failed"; exit 1; }
mb=build/t/tools/model-bench
timeout 60 $mb -d cuda -c 16 -n 32 -r 3 -k 0 "$f" 2>&1 | grep -E '^(prefill|decode-median)' | tee "$OUT/wall.txt"
t0=$(date +%s)
if command -v nsys >/dev/null 2>&1; then
	timeout 60 nsys profile -o "$OUT/prof" --stats=false $mb -d cuda -c 1 -n 8 -r 1 -k 0 "$f" \
	    >/dev/null 2>&1 && nsys stats -r cuda_gpu_kern_sum,cuda_api_sum "$OUT/prof.nsys-rep" \
	    >"$OUT/nsys.txt" 2>&1
	rm -f "$OUT/prof.nsys-rep" "$OUT/prof.sqlite"
	echo "nsys in $(( $(date +%s) - t0 ))s"
fi
t0=$(date +%s)
if command -v ncu >/dev/null 2>&1; then
	timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum -c 2000 --csv \
	    $mb -d cuda -c 1 -n 1 -r 1 -k 0 "$f" >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
	echo "ncu rc=$? in $(( $(date +%s) - t0 ))s, $(grep -c gpu__time_duration "$OUT/ncu.csv") kernels"
	# "ID","Process ID","Process Name","Host Name","Kernel Name",...,"Metric Value"
	awk -F'","' '/gpu__time_duration/ { n = $5; sub(/\(.*/, "", n); sub(/^void /, "", n);
	    v = $NF; gsub(/[",]/, "", v); u = $(NF - 1);
	    v *= u ~ /^msecond/ ? 1e6 : u ~ /^usecond/ ? 1e3 : u ~ /^second/ ? 1e9 : 1;
	    t[n] += v; c[n]++; T += v }
	    END { for (n in t) printf "%10.1f us %5d  %5.1f%%  %s\n", t[n] / 1e3, c[n], 100 * t[n] / T, n;
	    printf "%10.1f us total (2 forwards: 1-token prefill + 1 decode step)\n", T / 1e3 }' \
	    "$OUT/ncu.csv" | sort -rn >"$OUT/ncu-sum.txt"
	cat "$OUT/ncu-sum.txt" | head -30
fi
[ -f "$OUT/nsys.txt" ] && head -60 "$OUT/nsys.txt"
rm -f "$f"
