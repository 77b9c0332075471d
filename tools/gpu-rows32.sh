#!/bin/sh
# gpu-rows32.sh: the CUDA backend's steps of 32 rows (its default since
# 2026-12-05; MEMRA_CUDA_STEP_ROWS=16 the old limit), on the GPU.
#   usage: OUT=DIR sh tools/gpu-rows32.sh [SHAPE:QUANT]
# 1. kernel-check on model A (when models/A is here): every "rows32" line
#    (each op at 32 rows against its rows one by one at 16, bit for bit, and
#    the two model lines) OK, and the model checks, now run at 32.
# 2. serve on cuda at its default step rows: tools/serve-identity.py at
#    c = 32 (each of 32 requests byte-identical to its solo reply) on A and
#    its NVFP4 GGUF.
# 3. serve under load, A B B A: A = the default (32 rows a step), B =
#    MEMRA_CUDA_STEP_ROWS=16, on a gguf-random file of SHAPE:QUANT (default
#    9b:Q8_0) at GPU_ROWS_C (default 8,16,32,64) concurrent requests of
#    GPU_ROWS_LEN (PROMPT:GEN, default 512:128), GPU_ROWS_BLOCKS blocks
#    (default 1): tools/serve-abba.py, rows in $OUT/rows32-serve.tsv.
# Verdict lines in $OUT/rows32.log; exit 0 when 1 and 2 hold.
set -u
OUT=${OUT:-$(mktemp -d)}
cd "$(dirname "$0")/.." || exit 2
A=${A:-models/A}
G=${TMPDIR:-/tmp}/memra-gguf
fq=${1:-9b:Q8_0}
mkdir -p "$G"
make CUDA=1 CUDA_ARCH=90 -j16 all build/t/tools/gguf-random >"$OUT/build-rows32.log" 2>&1 ||
	{ tail -20 "$OUT/build-rows32.log"; exit 1; }
ok=0
serve_up() {	# PORT: wait for /health
	for _ in $(seq 180); do
		python3 -c 'import sys, urllib.request as u; u.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=2)' \
		    "$1" 2>/dev/null && return 0
		sleep 1
	done
	return 1
}
{
	if [ -d "$A" ]; then
		timeout 150 bin/kernel-check "$A" >"$OUT/rows32-kc.log" 2>&1 || ok=1
		n=$(grep -c '^rows32 .* OK$' "$OUT/rows32-kc.log")
		f=$(grep -c '^rows32 .* FAIL$' "$OUT/rows32-kc.log")
		echo "kernel-check $A: rows32 lines $n OK, $f FAIL; $(grep -E '^(ALL GREEN|[0-9]+ FAILED)' "$OUT/rows32-kc.log")"
		grep -E '^(model|rows32 model)' "$OUT/rows32-kc.log"
		[ "$f" = 0 ] && [ "$n" -gt 0 ] || ok=1
		[ -e "$G/A-nvfp4.gguf" ] || bin/quant-nvfp4 "$A" "$G/A-nvfp4.gguf" >/dev/null 2>&1
		for m in "$A" "$G/A-nvfp4.gguf"; do
			MEMRA_MODELS="a=$m" MEMRA_DEVICE=cuda MEMRA_MAX_SESSIONS=32 MEMRA_CTX=2048 \
			    bin/serve --port 18766 2>"$OUT/rows32-serve-$(basename "$m").log" & sp=$!
			if serve_up 18766; then
				r=$(timeout 300 python3 tools/serve-identity.py http://127.0.0.1:18766 -c 32 \
				    --vocab 4000 2>&1 | tail -n 1)
			else
				r="IDENTITY FAIL: serve did not come up"
			fi
			kill $sp 2>/dev/null; wait $sp 2>/dev/null
			echo "serve-identity at 32 rows $m: $r"
			case $r in "IDENTITY PASS"*) ;; *) ok=1 ;; esac
		done
	fi
	shape=${fq%%:*} q=${fq#*:}
	f=$G/qwen35-$shape-random-$q.gguf
	[ -e "$f" ] || build/t/tools/gguf-random -p "$shape" -t "$q" "$f" >/dev/null
	vocab=$(bin/gguf-inspect -t "$f" | awk -F'\t' '$1 == "token_embd.weight" { split($3, d, ","); print d[2] }')
	cs=${GPU_ROWS_C:-8,16,32,64}
	cmax=$(echo "$cs" | tr ',' '\n' | sort -n | tail -n 1)
	pg=${GPU_ROWS_LEN:-512:128}
	p=${pg%%:*} g=${pg#*:}
	ctx=$((p + g + 64))
	echo "== serve $shape $q: prompt $p, reply $g, c = $cs; A = 32 rows a step, B = MEMRA_CUDA_STEP_ROWS=16"
	srv="MEMRA_MODELS=r=$f MEMRA_DEVICE=cuda MEMRA_MAX_SESSIONS=$cmax MEMRA_CTX=$ctx"
	python3 tools/serve-abba.py --port-a 18100 --port-b 18101 --blocks "${GPU_ROWS_BLOCKS:-1}" \
	    -a "$srv MEMRA_PORT=18100 bin/serve" \
	    -b "$srv MEMRA_CUDA_STEP_ROWS=16 MEMRA_PORT=18101 bin/serve" \
	    --bench "-c $cs -p $p -g $g --vocab $vocab" \
	    --tsv "$OUT/rows32-serve.tsv" --log "$OUT/rows32-serve.log" \
	    --model "qwen35-$shape-random" --quant "$q" --ctx "$ctx" --peer "serve-16rows" ||
		echo "serve-abba: failed (log $OUT/rows32-serve.log)"
} >"$OUT/rows32.log" 2>&1
cat "$OUT/rows32.log"
[ $ok = 0 ] && echo "ROWS32 GPU PASS" || echo "ROWS32 GPU FAIL"
exit $ok
