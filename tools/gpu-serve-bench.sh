#!/bin/sh
# gpu-serve-bench.sh: serve under load on the GPU against llama.cpp's
# llama-server, the same random-weight file of a real shape, the same GPU,
# interleaved A B B A (tools/serve-abba.py, tools/serve-bench.py).
#   usage: sh tools/gpu-serve-bench.sh LLAMA_SERVER [SHAPE:QUANT ...]
#     LLAMA_SERVER  llama-server's path (tools/llamacpp-cuda.sh with
#                   LLAMACPP_TARGET=llama-server); a file holding the path in
#                   its last line works too (the build's stdout), and then the
#                   script waits for the build (GPU_SERVE_WAIT s, default 420)
#     SHAPE:QUANT   gguf-random shapes and types, default 9b:Q8_0
# Environment: GPU_SERVE_C (default 1,2,4,8,16,32,64), GPU_SERVE_LEN
# (PROMPT:GEN pairs, default "512:256"), GPU_SERVE_BLOCKS (A B B A blocks,
# default 1), GPU_SERVE_DEVICE (memra's device, default cuda), GPU_SERVE_MEMRA
# (more of memra's variables, e.g. "MEMRA_STEP_PREFILL=512": in A's command, so
# the log and the TSV name them; and in the tag), OUT (logs and TSV rows; default a temporary directory),
# MEMRA_COMMIT (the commit named in the rows).  Each server boots once a run
# with room for the largest concurrency: memra MEMRA_MAX_SESSIONS = the
# largest c and MEMRA_CTX = PROMPT + GEN + 64; llama-server -np = the largest
# c with the same context a slot (-c = np x that), every layer on the GPU.
# Needs bin/serve and build/t/tools/gguf-random built with CUDA=1.
set -eu
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=tools/peer-scen.sh
. tools/peer-scen.sh
[ $# -ge 1 ] || { echo "usage: sh tools/gpu-serve-bench.sh LLAMA_SERVER [SHAPE:QUANT ...]" >&2; exit 2; }
ls=$1; shift
OUT=${OUT:-$(mktemp -d)}
if [ -f "$ls" ] && [ ! -x "$ls" ]; then	# the build's stdout: wait for its last line
	t0=$(date +%s)
	while ! { p=$(tail -n 1 "$ls" 2>/dev/null) && [ -n "$p" ] && [ -x "$p" ]; }; do
		[ $(( $(date +%s) - t0 )) -lt "${GPU_SERVE_WAIT:-420}" ] ||
			{ echo "gpu-serve-bench.sh: llama-server not built after ${GPU_SERVE_WAIT:-420} s" >&2; exit 1; }
		sleep 5
	done
	echo "llama-server ready after $(( $(date +%s) - t0 )) s of waiting: $p"
	ls=$p
fi
[ -x "$ls" ] || { echo "gpu-serve-bench.sh: $ls: not an executable" >&2; exit 2; }
[ $# -ge 1 ] || set -- 9b:Q8_0
cs=${GPU_SERVE_C:-1,2,4,8,16,32,64}
cmax=$(echo "$cs" | tr ',' '\n' | sort -n | tail -n 1)
for fq in "$@"; do
	shape=${fq%%:*} q=${fq#*:}
	random_gguf "$shape" "$q" || { echo "gguf-random -p $shape -t $q: failed" >&2; exit 1; }
	for pg in ${GPU_SERVE_LEN:-512:256}; do
		p=${pg%%:*} g=${pg#*:}
		ctx=$((p + g + 64))
		tag=serve-$shape-$q-p$p-g$g
		extra=${GPU_SERVE_MEMRA:-}
		[ -z "$extra" ] || tag=$tag-$(echo "$extra" | tr -c 'A-Za-z0-9=_\n' '-' | sed 's/MEMRA_//g; s/=//g')
		echo "== $shape $q: prompt $p, reply $g, c = $cs; A = memra serve, B = llama-server"
		python3 tools/serve-abba.py --port-a 18100 --port-b 18101 \
		    --blocks "${GPU_SERVE_BLOCKS:-1}" \
		    -a "MEMRA_MODELS=r=$f MEMRA_DEVICE=${GPU_SERVE_DEVICE:-cuda} MEMRA_MAX_SESSIONS=$cmax MEMRA_CTX=$ctx MEMRA_PORT=18100${extra:+ $extra} bin/serve" \
		    -b "$ls -m $f --port 18101 -np $cmax -c $((cmax * ctx)) -ngl 999" \
		    --bench "-c $cs -p $p -g $g --vocab $vocab" \
		    --tsv "$OUT/$tag.tsv" --log "$OUT/$tag.log" \
		    --model "qwen35-$shape-random" --quant "$q" --ctx "$ctx" ||
			echo "serve-abba $tag: failed (log $OUT/$tag.log)"
	done
done
