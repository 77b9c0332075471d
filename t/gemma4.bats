bats_require_minimum_version 1.5.0
# gemma4 (Gemma-4's text model) on the CPU backend against transformers 5.17: the tiny
# random models of t/data/gemma4 (tools/make-gemma4-models.py), their reference logits and
# greedy ids in refs.json, and llama.cpp's converter's GGUF of each.
#   g4-dense       sliding + global layers of different head sizes, soft-capped logits
#   g4-ple-shared  per-layer inputs, the last two layers reading earlier K/V, double-wide MLPs
#   g4-moe-keqv    K = V global layers with one K/V head, the MoE block beside each MLP,
#                  Gemma4ForConditionalGeneration's names (model.language_model.*)
setup() {
	load helper
	load arch
	arch_setup gemma4 g4-dense g4-ple-shared g4-moe-keqv
}

# The model's metadata and tensor table (name, type, shape), sorted; no tokenizer (the
# converter's run skipped it).
layout() {
	gguf-inspect "$1" | grep -E '^  (gemma4\.|general\.architecture|rope_freqs|token_embd|output|per_layer|blk\.)' |
	    awk '{print $1, $2, $3}' | sort
}


@test "HF checkpoints: logits of every position equal transformers' to 1e-4 relative" {
	need_py numpy
	for m in $MODELS; do
		run -0 --separate-stderr python3 "$TOP/t/peer/logits_vs_refs.py" "$ML" "$M/$m" "$M/$m/refs.json" 1e-4
		[ "${#lines[@]}" = 3 ]
	done
}

@test "llama.cpp's converter's F32 GGUF: logits equal transformers' to 1e-4 relative" {
	need_py numpy
	for m in $MODELS; do
		run -0 --separate-stderr python3 "$TOP/t/peer/logits_vs_refs.py" "$ML" "$M/$m/llamacpp-f32.gguf" "$M/$m/refs.json" 1e-4
	done
}

@test "quant-nvfp4's F32 GGUF of the HF checkpoint: llama.cpp's metadata and tensors, its logits bit for bit" {
	for m in $MODELS; do
		quant-nvfp4 -t 2 --type F32 "$M/$m" "$BATS_TEST_TMPDIR/a.gguf" 2>/dev/null
		"$ML" -t 2 "$BATS_TEST_TMPDIR/a.gguf" "$BATS_TEST_TMPDIR/ours" $IDS
		"$ML" -t 2 "$M/$m/llamacpp-f32.gguf" "$BATS_TEST_TMPDIR/theirs" $IDS
		cmp "$BATS_TEST_TMPDIR/ours" "$BATS_TEST_TMPDIR/theirs"
		layout "$BATS_TEST_TMPDIR/a.gguf" >"$BATS_TEST_TMPDIR/ours.txt"
		layout "$M/$m/llamacpp-f32.gguf" >"$BATS_TEST_TMPDIR/theirs.txt"
		diff "$BATS_TEST_TMPDIR/ours.txt" "$BATS_TEST_TMPDIR/theirs.txt"
	done
}

@test "gguf-inspect shows gemma4's per-layer metadata and rope_freqs" {
	run -0 gguf-inspect "$M/g4-moe-keqv/llamacpp-f32.gguf"
	[[ $output == *"gemma4.attention.head_count_kv           array[int32]  [2, 1, 2, 1]"* ]]
	[[ $output == *"gemma4.attention.sliding_window_pattern  array[bool]   [true, false, true, false]"* ]]
	[[ $output == *"blk.0.ffn_gate_up_exps.weight"*"F32      32x32x6 "* ]]
	[[ $output == *"rope_freqs.weight"*"F32      16 "* ]]
}

@test "greedy ids equal transformers' (refs.json greedy), HF and GGUF, prefill and token by token" {
	need_py json
	for m in $MODELS; do
		want=$(refs_greedy "$M/$m")
		for f in "$M/$m" "$M/$m/llamacpp-f32.gguf"; do
			run -0 --separate-stderr "$MG" -t 2 -p "$f" 16 5 17 250 3 99 42 7 1
			[ "$output" = "$want" ]
			run -0 --separate-stderr "$MG" -t 2 "$f" 16 5 17 250 3 99 42 7 1
			[ "$output" = "$want" ]
		done
	done
}

@test "token-by-token logits agree with the prefill's to 1e-5 relative (past the sliding window)" {
	need_py numpy
	for m in $MODELS; do
		steps_agree "$M/$m"
	done
}

@test "batched decode is bit-identical to one sequence at a time" {
	for m in $MODELS; do
		batch_identical "$M/$m"
	done
}

@test "run-gen: prefill and decode agree (MATCH) on text prompts, HF and NVFP4 GGUF" {
	quant-nvfp4 -t 2 "$M/g4-ple-shared" "$BATS_TEST_TMPDIR/n.gguf" 2>/dev/null
	for f in "$M/g4-dense" "$M/g4-moe-keqv" "$BATS_TEST_TMPDIR/n.gguf"; do
		run -0 --separate-stderr run-gen --raw -n 12 -t 2 "$f" "hello world, the cat sat"
		[[ $stderr == *"MATCH"* ]]
	done
}

@test "a config.json that disagrees with the weights is an error naming the tensor" {
	need_py json
	d=$BATS_TEST_TMPDIR/m
	mkdir "$d"
	cp "$M/g4-moe-keqv/"* "$d/"
	python3 - "$d/config.json" <<-'PY'
	import json, sys
	c = json.load(open(sys.argv[1])); c["text_config"]["moe_intermediate_size"] = 8
	json.dump(c, open(sys.argv[1], "w"))
	PY
	run -1 --separate-stderr run-gen --raw -n 1 -t 2 "$d" hi
	[ "$stderr" = "run-gen: $d: tensor 'model.language_model.layers.0.experts.down_proj': not the shape config.json implies for 'blk.0.ffn_down_exps.weight'" ]
}

# The gemma4_assistant drafter (t/data/gemma4/g4-assistant, for g4-dense): Q-only attention
# over the trunk's K/V; refs.json holds transformers' draft steps after three prompts.
@test "assistant: each draft step's logits equal transformers' to 1e-4 relative, every draft equal" {
	run -0 python3 "$TOP/t/peer/assist_vs_refs.py" "$TOP/build/t/tools/model-assist" \
	    "$M/g4-dense" "$M/g4-assistant" "$M/g4-assistant/refs.json" 1e-4
	[ "${#lines[@]}" = 3 ]
}

@test "assistant: run-spec K=1..4 identical to plain greedy, drafts accepted" {
	run -0 --separate-stderr run-spec -t 2 --raw -K 1-4 -n 16 "$M/g4-dense+$M/g4-assistant" \
	    "hello world, the quick brown fox"
	[[ $stderr == *"[gemma-draft] assistant drafter: 3 layers, hidden 24 over the trunk's K/V, full head (320 rows)"* ]]
	for k in 1 2 3 4; do
		[[ ${lines[$k]} == "K=$k "*"PASS (identical to plain)" ]]
	done
	[ "${lines[5]}" = "SELF-CONSISTENCY PASS" ]
}

@test "assistant: MEMRA_DRAFT attaches it; sampled speculation equals its seeded rerun" {
	MEMRA_DRAFT="$M/g4-assistant" run -0 --separate-stderr run-spec -t 2 --raw -K 3 \
	    --temp 0.8 --seed 5 -n 16 "$M/g4-dense" "once upon a time"
	[[ $stderr == *"[gemma-draft] assistant drafter"* ]]
	[[ ${lines[1]} == "K=3 "*"PASS (identical to a seeded rerun)" ]]
	[ "${lines[2]}" = "SELF-CONSISTENCY PASS" ]
}

@test "assistant: MEMRA_GEMMA_DRAFT_RANKS trims its head, with a proof line; output unchanged" {
	seq 0 255 >"$BATS_TEST_TMPDIR/r.txt"
	MEMRA_GEMMA_DRAFT_RANKS="$BATS_TEST_TMPDIR/r.txt" run -0 --separate-stderr run-spec -t 2 \
	    --raw -K 2 -n 16 --draft "$M/g4-assistant" "$M/g4-dense" "hello world"
	[[ $stderr == *"[gemma-draft] assistant drafter: 3 layers, hidden 24 over the trunk's K/V, head trimmed to 256 rows (F32, d2t map)"* ]]
	[[ ${lines[1]} == "K=2 "*"PASS (identical to plain)" ]]
}

@test "assistant: a drafter that does not fit, or alone, or TRIM_ADAPT is an error with a reason" {
	run -1 --separate-stderr run-spec -t 2 -K 1 "$M/g4-dense+$M/g4-moe-keqv" hi
	[[ $stderr == *"not a gemma4_assistant"* ]]
	run -1 --separate-stderr run-gen -t 2 --jsonl -n 2 "$M/g4-assistant" <<<'{"prompt": [5, 17]}'
	[[ $stderr == *"drafts for a gemma4 trunk only"* ]]
	MEMRA_GEMMA_TRIM_ADAPT=512 run -2 --separate-stderr run-spec -t 2 -K 1 "$M/g4-dense+$M/g4-assistant" hi
	[[ $stderr == *"MEMRA_GEMMA_TRIM_ADAPT: learned draft slots are not supported"* ]]
	MEMRA_GEMMA_DRAFT_RANKS=/nonexistent run -1 --separate-stderr run-spec -t 2 -K 1 "$M/g4-dense" hi
	[[ $stderr == *"rank list without a drafter"* ]]
}

# bats test_tags=gpu
@test "on the CUDA backend: greedy ids equal the CPU's (argmax gate MATCH), batched decode bit-identical" {
	cuda_same "$M/g4-dense" "$M/g4-ple-shared" "$M/g4-moe-keqv"
}

# bats test_tags=gpu
@test "assistant on the CUDA backend: run-spec K=1..4 identical to plain greedy, drafts accepted" {
	run -0 --separate-stderr run-spec --raw -K 1-4 -n 16 --device cuda "$M/g4-dense+$M/g4-assistant" \
	    "hello world, the quick brown fox"
	for k in 1 2 3 4; do
		[[ ${lines[$k]} == "K=$k "*"PASS (identical to plain)" ]]
	done
	[ "${lines[5]}" = "SELF-CONSISTENCY PASS" ]
}
