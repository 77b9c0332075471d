#!/bin/sh
# gpu-prefix-bench.sh: issue 25's prefix-cache benchmarks on the GPU, the same
# random-weight file of a real shape for every arm, interleaved A B B A
# (tools/serve-abba.py with tools/serve-turns.py as the load).
#   usage: sh tools/gpu-prefix-bench.sh LLAMA_SERVER [SHAPE:QUANT ...]
#     LLAMA_SERVER  llama-server's path (tools/llamacpp-cuda.sh with
#                   LLAMACPP_TARGET=llama-server); - without that peer
#     SHAPE:QUANT   gguf-random shapes and types, default 9b:Q8_0
# Two workloads, each against two peers:
#   turns   GPU_PREFIX_CONVS (default 4) conversations at once of GPU_PREFIX_TURNS
#           (8) turns by token ids: turn 1 sends 1024 ids, each later turn the
#           conversation so far (prompts and replies, as ids: return_token_ids /
#           llama-server's return_tokens) and 64 new ids; 64 new tokens a turn.
#           Figures: turn 1's TTFT (cold), the last turn's, their ratio, the TTFT
#           p50 of turns 2.., aggregate tok/s.
#   shared  64 requests in a closed loop of 16 streams, each a shared 2048-id
#           prompt then 64 ids of its own, 32 new tokens: TTFT p50 / p99, tok/s.
# Peers: B = memra with the prefix cache and the reuse pool off
# (MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0), then B = llama-server (its
# prompt cache: -np slots, --cache-reuse 256, cache_prompt); A is memra with
# its defaults (both on).  Rows in $OUT/prefix-*.tsv (scenarios prefix-turns-cN-*,
# prefix-shared-cN-*), logs beside them, each turn's line in
# $OUT/prefix-*-turns.jsonl (the runs in their order, A B B A).  Environment: GPU_PREFIX_BLOCKS (A B B A
# blocks, default 1), GPU_PREFIX_DEVICE (memra's device, default cuda),
# GPU_PREFIX_PEERS (default "off llama"; "off" with LLAMA_SERVER -),
# MEMRA_COMMIT.  Needs bin/serve, bin/gguf-inspect and build/t/tools/gguf-random.
set -eu
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=tools/peer-scen.sh
. tools/peer-scen.sh
[ $# -ge 1 ] || { echo "usage: sh tools/gpu-prefix-bench.sh LLAMA_SERVER [SHAPE:QUANT ...]" >&2; exit 2; }
ls=$1; shift
peers=${GPU_PREFIX_PEERS:-off llama}
case " $peers " in
*" llama "*) [ -x "$ls" ] || { echo "gpu-prefix-bench.sh: $ls: not an executable" >&2; exit 2; } ;;
esac
[ $# -ge 1 ] || set -- 9b:Q8_0
OUT=${OUT:-$(mktemp -d)}
nc=${GPU_PREFIX_CONVS:-4} nt=${GPU_PREFIX_TURNS:-8}
for fq in "$@"; do
	shape=${fq%%:*} q=${fq#*:}
	random_gguf "$shape" "$q" || { echo "gguf-random -p $shape -t $q: failed" >&2; exit 1; }
	# the longest request: a conversation's last turn (1024 + turns x (64 + 64)
	# ids) or a shared request (2048 + 64 + 32), and room
	ctx=$((1024 + nt * 128 + 64)) np=16
	[ "$ctx" -ge $((2048 + 96 + 64)) ] || ctx=$((2048 + 96 + 64))
	mem="MEMRA_MODELS=r=$f MEMRA_DEVICE=${GPU_PREFIX_DEVICE:-cuda} MEMRA_MAX_SESSIONS=$np MEMRA_CTX=$ctx"
	for peer in $peers; do
		case $peer in
		off) b="MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0 $mem MEMRA_PORT=18101 bin/serve"
		     api=openai name=serve-cache-off ;;
		llama) b="$ls -m $f --port 18101 -np $np -c $((np * ctx)) -ngl 999 --cache-reuse 256"
		     api=llama name=llama-server ;;
		*) echo "gpu-prefix-bench.sh: GPU_PREFIX_PEERS: '$peer': off or llama" >&2; exit 2 ;;
		esac
		for w in turns shared; do
			tag=prefix-$shape-$q-$w-vs-$peer
			if [ "$w" = turns ]; then
				args="idturns -c $nc -t $nt -p 1024 -q 64 -g 64 --vocab $vocab --turns-log $OUT/$tag-turns.jsonl"
				aa="$args --api openai" bb="$args --api $api"
			else
				aa="shared -n 64 -c 16 -p 2048 -q 64 -g 32 --vocab $vocab" bb=$aa
			fi
			echo "== $shape $q: $w; A = memra serve (prefix cache and reuse pool on), B = $name"
			python3 tools/serve-abba.py --port-a 18100 --port-b 18101 \
			    --blocks "${GPU_PREFIX_BLOCKS:-1}" -a "$mem MEMRA_PORT=18100 bin/serve" -b "$b" \
			    --client tools/serve-turns.py --bench "$aa" --bench-b "$bb" \
			    --scenario "prefix-$w" --peer "$name" \
			    --tsv "$OUT/$tag.tsv" --log "$OUT/$tag.log" \
			    --model "qwen35-$shape-random" --quant "$q" --ctx "$ctx" ||
				echo "serve-abba $tag: failed (log $OUT/$tag.log)"
		done
	done
done
