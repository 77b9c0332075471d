bats_require_minimum_version 1.5.0
# The GPU gate and benchmark helpers (build/t/tools/model-spec, gguf-random,
# model-bench) and the CUDA device name, run on the CPU backend here; the
# device runs them with -d cuda (tools/gpu-run.sh).
setup() {
	load helper
	T=$TOP/build/t/tools
	[ -x "$T/model-spec" ] && [ -x "$T/gguf-random" ] && [ -x "$T/model-bench" ] ||
	    skip "build/t/tools not built (make units)"
}

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

@test "device 'cuda' without a GPU or without CUDA fails and says why" {
	has_gpu && skip "a GPU is present"
	d=$(model_a)
	run -1 --separate-stderr "$T/model-spec" -d cuda "$d" /dev/null
	[[ $stderr == "model-spec: backend: 'cuda': built without CUDA" ||
	    $stderr == "model-spec: no CUDA device" ]]
}

@test "speculative decoding equals greedy on model A (K = 1, 2) and greedy equals itself" {
	d=$(model_a)
	head -1 "$TOP/t/data/a-greedy.tsv" >"$BATS_TEST_TMPDIR/case"
	run -0 --separate-stderr "$T/model-spec" -g cpu:scalar -K 2 -n 12 "$d" "$BATS_TEST_TMPDIR/case"
	[ "${lines[1]}" = "K=1 equal-greedy 1/1 drafted 5 accepted 5 rounds 5 rate 1.000" ]
	[[ ${lines[2]} == "K=2 equal-greedy 1/1 "* ]]
	[ "${lines[3]}" = "SELF-CONSISTENCY PASS" ]
	[[ ${lines[4]} == "GREEDY cpu-"*" = cpu-scalar: 1 equal, 0 near-ties, 0 differ: PASS" ]]
}

@test "gguf-random writes a qwen35 GGUF that loads and decodes" {
	f=$BATS_TEST_TMPDIR/tiny.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t NVFP4 "$f"
	run -0 --separate-stderr gguf-inspect -k general.architecture "$f"
	[ "$output" = "qwen35" ]
	run -0 --separate-stderr gguf-inspect -k qwen35.block_count "$f"
	[ "$output" = "5" ]
	run -0 --separate-stderr "$T/model-bench" -d cpu -c 20 -n 2 -r 1 -k 1 "$f"
	[[ ${lines[1]} == "prefill-cold	ctx	20	"* ]]
	[[ ${lines[2]} == "prefill	ctx	20	"* ]]
	[[ ${lines[4]} == "decode-median	ctx	20	n	2	reps	1	"* ]]
	[[ ${lines[5]} == "verify	K	1	rows	2	"* ]]
}

@test "gguf-random's file also loads and evaluates in llama.cpp (llama-bench runs on the same files)" {
	need_llama_cpp
	f=$BATS_TEST_TMPDIR/tiny.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t Q8_0 "$f"
	run -0 --separate-stderr python3 -c 'import sys, llama_cpp
m = llama_cpp.Llama(sys.argv[1], n_ctx=64, verbose=False)
m.eval([5, 6, 7])
print(m.n_vocab(), len(m.scores[2]))' "$f"
	[ "$output" = "1000 1000" ]
}

@test "gguf-random refuses an unknown shape or type" {
	run -2 --separate-stderr "$T/gguf-random" -p 70b "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -p '70b': not a shape (9b, 27b, tiny)" ]
	run -2 --separate-stderr "$T/gguf-random" -t Q9 "$BATS_TEST_TMPDIR/x.gguf"
	[ ! -e "$BATS_TEST_TMPDIR/x.gguf" ]
}

@test "serve answers token-id prompts on gguf-random's file (its stand-in BPE vocabulary has an empty merges list), as the serving benchmark sends them" {
	load serve
	P=$BATS_TEST_TMPDIR
	f=$P/tiny.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t Q8_0 "$f"
	start_serve MEMRA_MODELS="r=$f" MEMRA_MAX_SESSIONS=2 MEMRA_CTX=128
	run -0 http POST /v1/completions '{"model":"r","prompt":[5,6,7,8],"max_tokens":6,"temperature":0,"ignore_eos":true}' -H 'Content-Type: application/json'
	stop_serve
	[[ $output == "200 "* ]]
	[ "$(printf '%s' "${output#200 }" | jq -r .usage.completion_tokens)" = 6 ]
	[ "$(printf '%s' "${output#200 }" | jq -r .usage.prompt_tokens)" = 4 ]
}
