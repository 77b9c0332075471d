#!/bin/sh
# gpu-vision-bench.sh: image-prompt time to first token on the GPU (issue 32):
# run-gen's TTFT of a prompt holding images (the vision tower's encoding of
# them counted, run-gen's vision_s) against that of a text prompt of the same
# token count on the same trunk, interleaved A B B A (tools/abba).
#   usage: sh tools/gpu-vision-bench.sh [TRUNK MMPROJ [OUTDIR]]
#     TRUNK   a gemma4 GGUF whose vocabulary holds Gemma-4's image markers
#     MMPROJ  its vision tower, a gemma4v mmproj GGUF projecting to the trunk's
#             width.  Without the two (or as "- -"): gguf-random's files of
#             shape GPU_VISION_SHAPE (default 31b: gemma-4-31B-it's trunk at
#             GPU_VISION_TYPE, default Q8_0, and its tower 31b-mmproj in BF16;
#             26b-a4b and 26b-mmproj; tiny-gemma4 and tiny-mmproj), made once
#             under ${TMPDIR:-/tmp}/memra-gguf and kept
#     OUTDIR  the PNGs, logs, vision-abba.tsv (the rows) and vision-summary.txt
#             (default: OUT, else a temporary directory)
# Environment: GPU_VISION_IMAGES (the scenarios, default "768x768:1 768x768:2":
# WxH:N, N images of W x H pixels in one prompt, random pixels, each its own),
# GPU_VISION_TOKENS (an image's soft-token budget, run-gen --image-tokens,
# default 280), GPU_VISION_BLOCKS (A B B A blocks, default 1),
# GPU_VISION_DEVICE (run-gen's device, the tower's too, default cuda; cpu tries
# the script without a GPU), GPU_VISION_THREADS (run-gen -t), MEMRA_COMMIT
# (the commit the rows name), GPU_VISION_PROF=1 (then the tower's encoding of
# the first scenario's image profiled kernel by kernel, build/t/tools/model-bench
# -V WxH -P, into vision-prof.txt, its eight costliest kernels in the summary;
# a GPU's only).  The BF16 tower's products run on tensor cores (lib/vision.h,
# backend_matmul_half: x rounded to BF16, cublasGemmEx, fp32 sums; the profile's
# "matmul_half round" and "cublas bf16 gemm"); before that change they were fp32
# cuBLAS SGEMM ("cublas sgemm"), 0.37 s for a 768x768 image on the 31b shape
# on an H100 (issue 32), so rows from before it are another numerics' timing.
# Each arm is one run-gen --jsonl process given the same request twice, -n 1:
# the first warms the device (kernels, the allocator), the second is timed
# (its ttft_s).  A: token ids only; B: the same ids but for a <|image|> marker
# per image (8 ids, then marker and an id per image, then 8 ids), its images
# expanded to <|image> N soft tokens <image|>, and A's prompt that many ids.
# The script checks that both arms' prompts had the same token count.  Needs
# bin/run-gen, bin/gguf-inspect, build/t/tools/gguf-random and image-prep
# (built with CUDA=1 for the GPU).
set -u
cd "$(dirname "$0")/.." || exit 2
case $# in
0) trunk=- mm=- ;;
2|3) trunk=$1 mm=$2 ;;
*) echo "usage: sh tools/gpu-vision-bench.sh [TRUNK MMPROJ [OUTDIR]]" >&2; exit 2 ;;
esac
OUT=${3:-${OUT:-$(mktemp -d)}}
mkdir -p "$OUT" || exit 1
dev=${GPU_VISION_DEVICE:-cuda}
budget=${GPU_VISION_TOKENS:-280}
for t in bin/run-gen bin/gguf-inspect build/t/tools/gguf-random build/t/tools/image-prep; do
	[ -x "$t" ] || { echo "gpu-vision-bench.sh: $t: not built" >&2; exit 2; }
done
if [ "$trunk" = - ] && [ "$mm" = - ]; then
	shape=${GPU_VISION_SHAPE:-31b} q=${GPU_VISION_TYPE:-Q8_0}
	G=${TMPDIR:-/tmp}/memra-gguf
	mkdir -p "$G" || exit 1
	tower=${shape%%-*}-mmproj
	trunk=$G/gemma4-$shape-random-$q.gguf mm=$G/gemma4-$tower-random-BF16.gguf
	for x in "$trunk:-p $shape -t $q" "$mm:-p $tower -t BF16"; do
		f=${x%%:*}
		[ -e "$f" ] && continue
		# shellcheck disable=SC2086
		build/t/tools/gguf-random ${x#*:} "$f" >"$OUT/vision-gguf.log" 2>&1 ||
			{ echo "gpu-vision-bench.sh: gguf-random ${x#*:}: $(tail -n 1 "$OUT/vision-gguf.log")" >&2; exit 1; }
	done
	model="random gemma4 $shape shape + its tower (gguf-random -p $shape, $tower)"
	quant=$q+BF16
else
	for f in "$trunk" "$mm"; do
		[ -r "$f" ] || { echo "gpu-vision-bench.sh: $f: cannot read" >&2; exit 2; }
	done
	model="$(basename "$trunk") + $(basename "$mm")"
	ty() { bin/gguf-inspect -t "$1" | awk -F'\t' -v t="$2" '$1 == t { print $2 }'; }
	quant=$(ty "$trunk" token_embd.weight)+$(ty "$mm" mm.input_projection.weight)
fi
# the image marker's id, and the tower's patch and pooling (image-prep sizes the images as run-gen)
mark=$(bin/run-gen --tokenize --special "$trunk" '<|image|>' 2>/dev/null) || mark=
case $mark in
''|*[!0-9]*) echo "gpu-vision-bench.sh: $trunk: no <|image|> token in its vocabulary" >&2; exit 1 ;;
esac
patch=$(bin/gguf-inspect -k clip.vision.patch_size "$mm") ||
    { echo "gpu-vision-bench.sh: $mm: not an mmproj GGUF" >&2; exit 1; }
pool=$(bin/gguf-inspect -k clip.vision.projector.scale_factor "$mm" 2>/dev/null) || pool=3
ok=0
echo "== trunk $trunk, tower $mm, $dev, budget $budget" | tee "$OUT/vision-summary.txt"
for sc in ${GPU_VISION_IMAGES:-768x768:1 768x768:2}; do
	wh=${sc%%:*} n=${sc#*:}
	w=${wh%%x*} h=${wh#*x}
	case $w$h$n in *[!0-9]*|'') echo "GPU_VISION_IMAGES: $sc: not WxH:N" >&2; exit 2 ;; esac
	imgs='' toks=0
	for i in $(seq "$n"); do
		p=$OUT/img-$wh-$i.png
		python3 -c 'import random,struct,sys,zlib
f,w,h,seed=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4])
r=random.Random(seed)
raw=b"".join(b"\0"+r.randbytes(3*w) for _ in range(h))
def chunk(t,d): return struct.pack(">I",len(d))+t+d+struct.pack(">I",zlib.crc32(t+d))
open(f,"wb").write(b"\x89PNG\r\n\x1a\n"+chunk(b"IHDR",struct.pack(">IIBBBBB",w,h,8,2,0,0,0))+
    chunk(b"IDAT",zlib.compress(raw,1))+chunk(b"IEND",b""))' "$p" "$w" "$h" "$i" || exit 1
		t=$(build/t/tools/image-prep -p "$patch" -k "$pool" -m "$budget" "$p" |
		    sed -n 's/.* tokens \([0-9]*\) .*/\1/p')
		[ -n "$t" ] || { echo "gpu-vision-bench.sh: $p: image-prep failed" >&2; exit 1; }
		imgs="$imgs --image $p" toks=$((toks + t))
	done
	# B: 8 ids, a marker and an id per image, 8 ids; A: as many ids as B's expanded prompt
	pb=$((16 + n + toks + 2 * n))
	ib=$(python3 -c 'import sys
m,n=int(sys.argv[1]),int(sys.argv[2])
ids=list(range(300,308))+[x for i in range(n) for x in (m,308+i)]+list(range(320,328))
print(", ".join(map(str,ids)))' "$mark" "$n")
	ia=$(python3 -c 'import sys; print(", ".join(str(300 + i % 500) for i in range(int(sys.argv[1]))))' "$pb")
	scen=ttft-img-${wh}x$n
	printf '{"prompt": [%s], "n": 1}\n{"prompt": [%s], "n": 1}\n' "$ia" "$ia" >"$OUT/req-$scen-a.jsonl"
	printf '{"prompt": [%s], "n": 1}\n{"prompt": [%s], "n": 1}\n' "$ib" "$ib" >"$OUT/req-$scen-b.jsonl"
	rg="bin/run-gen --jsonl --ids --device $dev ${GPU_VISION_THREADS:+-t $GPU_VISION_THREADS}"
	log=$OUT/vision-abba-$scen.log
	echo "== $scen: $n image(s) of $wh, $toks soft tokens, prompt $pb tokens; A = text ids, B = with the images"
	# shellcheck disable=SC2086
	timeout 580 python3 tools/abba -a "$rg $trunk <$OUT/req-$scen-a.jsonl" \
	    -b "$rg --image-tokens $budget$imgs --mmproj $mm $trunk <$OUT/req-$scen-b.jsonl" \
	    -r '(?s)"ttft_s": [0-9.]+.*?"ttft_s": ([0-9.]+)' --unit s \
	    --blocks "${GPU_VISION_BLOCKS:-1}" --tsv "$OUT/vision-abba.tsv" --log "$log" \
	    --binary run-gen --model "$model" --quant "$quant" --scenario "$scen" --ctx "$pb" \
	    --peer "text-ids-same-count" ||
		{ echo "abba $scen: failed (log $log)"; ok=1; continue; }
	# both arms' prompts of pb tokens, every gate MATCH; B's timed tower and prefill
	python3 - "$log" "$pb" "$scen" >>"$OUT/vision-summary.txt" <<'EOF' || ok=1
import json, re, statistics, sys
log, pb, scen = sys.argv[1], int(sys.argv[2]), sys.argv[3]
arms = {"A": [], "B": []}
for blk in re.split(r"^### ", open(log).read(), flags=re.M)[1:]:
    arm = re.match(r"block \d+ arm (\w)", blk).group(1)
    rs = [json.loads(l) for l in blk.splitlines() if l.startswith("{")]
    arms[arm].append(rs[-1])
    bad = [r for r in rs if r["prompt_tokens"] != pb or r["gate"] != "MATCH"]
    if len(rs) != 2 or bad:
        sys.exit("%s: arm %s: want 2 results of %d tokens, gate MATCH: %s" % (scen, arm, pb, rs))
med = lambda a, k: statistics.median(r[k] for r in arms[a])
print("%s\tprompt %d\tA ttft %.4f s prefill %.4f s\tB ttft %.4f s prefill %.4f s vision %.4f s\tB/A %.3f"
      % (scen, pb, med("A", "ttft_s"), med("A", "prefill_s"), med("B", "ttft_s"),
         med("B", "prefill_s"), med("B", "vision_s"), med("B", "ttft_s") / med("A", "ttft_s")))
EOF
	tail -n 1 "$OUT/vision-summary.txt"
done
if [ "${GPU_VISION_PROF:-0}" = 1 ]; then
	set -- ${GPU_VISION_IMAGES:-768x768:1}
	if timeout 300 build/t/tools/model-bench -V "${1%%:*}" -P -d "$dev" -r 3 "$mm" \
	    >"$OUT/vision-prof.txt" 2>&1; then
		{ grep '^vision-encode' "$OUT/vision-prof.txt"
		  grep '^prof' "$OUT/vision-prof.txt" | grep -v '(sum of kernels)' |
		      sort -t'	' -k5 -rn | head -8
		  grep '(sum of kernels)' "$OUT/vision-prof.txt"; } | tee -a "$OUT/vision-summary.txt"
	else
		echo "model-bench -V ${1%%:*} -P: failed ($OUT/vision-prof.txt)"; ok=1
	fi
fi
exit $ok
