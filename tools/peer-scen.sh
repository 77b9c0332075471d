# shellcheck shell=sh disable=SC2034
# peer-scen.sh: sourced by tools/gpu-run.sh, gpu-arch-bench.sh, gpu-serve-bench.sh and
# gpu-prefix-bench.sh (not run).
# peer_scen SC LLAMA_BENCH FILE DEVICE: one scenario of llama-bench (A) against
# model-bench (B) on the same FILE, both on the GPU, for tools/abba: sets a and b
# (the two commands), r (the regex of either's tok/s) and the positional
# parameters to SCENARIO CTX PEER (the rows' columns).  1 for an unknown SC.
#   decode     llama-bench tg128; model-bench 64 tokens after a 128-token prompt
#   decode-8k  tg32 at depth 8192; 32 tokens after an 8192-token prompt
#   prefill    pp512; a 512-token prompt
# (the positional parameters are the caller's: call it as `peer_scen ... || ...;
# set -- $ps_cols`, since a function cannot set its caller's)
peer_scen() {
	case $1 in
	decode)
		a="$2 -m $3 -p 0 -n 128 -r 3 -o md"
		b="build/t/tools/model-bench -d $4 -c 128 -n 64 -r 3 -k 0 $3"
		r='(?:tg128\s*\|\s*|decode-median.*?tok_s\s+)([0-9.]+)'
		ps_cols="decode-b1-vs-llama.cpp 128 llama-bench-tg128" ;;
	decode-8k)
		a="$2 -m $3 -p 0 -n 32 -d 8192 -r 2 -o md"
		b="build/t/tools/model-bench -d $4 -c 8192 -n 32 -r 2 -k 0 $3"
		r='(?:tg32 @ d8192\s*\|\s*|decode-median.*?tok_s\s+)([0-9.]+)'
		ps_cols="decode-b1-8k-vs-llama.cpp 8192 llama-bench-tg32-d8192" ;;
	prefill)
		a="$2 -m $3 -p 512 -n 0 -r 3 -o md"
		b="build/t/tools/model-bench -d $4 -c 512 -n 1 -r 1 -k 0 $3"
		r='(?:pp512\s*\|\s*|prefill\tctx.*?tok_s\s+)([0-9.]+)'
		ps_cols="prefill-512-vs-llama.cpp 512 llama-bench-pp512" ;;
	*) return 1 ;;
	esac
}

# random_gguf SHAPE QUANT: gguf-random's file of that shape and type under
# ${TMPDIR:-/tmp}/memra-gguf (made once, kept), its path in f and in vocab the rows of
# its token_embd (the ids a token-id prompt may use); 1 when it cannot be made.
random_gguf() {
	mkdir -p "${TMPDIR:-/tmp}/memra-gguf"
	f=${TMPDIR:-/tmp}/memra-gguf/qwen35-$1-random-$2.gguf
	[ -e "$f" ] || build/t/tools/gguf-random -p "$1" -t "$2" "$f" >/dev/null || return 1
	vocab=$(bin/gguf-inspect -t "$f" | awk -F'\t' '$1 == "token_embd.weight" { split($3, d, ","); print d[2] }')
}
