bats_require_minimum_version 1.5.0
# gemma4 (Gemma-4's text model) on the CPU backend against transformers 5.17: the tiny
# random models of t/data/gemma4 (tools/make-gemma4-models.py), their reference logits and
# greedy ids in refs.json, and llama.cpp's converter's GGUF of each.
#   g4-dense       sliding + global layers of different head sizes, soft-capped logits
#   g4-ple-shared  per-layer inputs, the last two layers reading earlier K/V, double-wide MLPs
#   g4-moe-keqv    K = V global layers with one K/V head, the MoE block beside each MLP,
#                  Gemma4ForConditionalGeneration's names (model.language_model.*)
#   g4-h512        the 26B-A4B / 31B head sizes: a global layer with heads of 512
setup() {
	load helper
	load arch
	arch_setup gemma4 g4-dense g4-ple-shared g4-moe-keqv g4-h512
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

@test "decode and verify steps at backend positions (recordable) equal the host positions' bits" {
	for m in $MODELS; do
		steps_dpos_same "$M/$m"
	done
	steps_dpos_same "$M/g4-dense/llamacpp-f32.gguf"
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

@test "assistant: a drafter that does not fit, or alone, or TRIM_ADAPT without the trim is an error with a reason" {
	run -1 --separate-stderr run-spec -t 2 -K 1 "$M/g4-dense+$M/g4-moe-keqv" hi
	[[ $stderr == *"not a gemma4_assistant"* ]]
	run -1 --separate-stderr run-gen -t 2 --jsonl -n 2 "$M/g4-assistant" <<<'{"prompt": [5, 17]}'
	[[ $stderr == *"drafts for a gemma4 trunk only"* ]]
	MEMRA_GEMMA_TRIM_ADAPT=512 run -2 --separate-stderr run-spec -t 2 -K 1 "$M/g4-dense+$M/g4-assistant" hi
	[ "$stderr" = "run-spec: MEMRA_GEMMA_TRIM_ADAPT: learned slots extend a trimmed head: set MEMRA_GEMMA_DRAFT_RANKS too" ]
	MEMRA_GEMMA_DRAFT_RANKS=/nonexistent run -1 --separate-stderr run-spec -t 2 -K 1 "$M/g4-dense" hi
	[[ $stderr == *"rank list without a drafter"* ]]
}

# learned RANKS: prompts p.jsonl, the target's greedy ids to them (said: one a line, sorted,
# unique; all: every one said) and RANKS, every token of the 320 but those
learned_setup() {
	local p
	printf '%s\n' '{"prompt": "hello world, the quick brown fox"}' '{"prompt": "once upon a time"}' \
	    '{"prompt": "the cat sat on the mat"}' >"$BATS_TEST_TMPDIR/p.jsonl"
	for p in "hello world, the quick brown fox" "once upon a time" "the cat sat on the mat"; do
		run-gen -t 2 --raw --ids --ignore-eos -n 32 "$M/g4-dense" "$p" 2>/dev/null | tr ' ' '\n'
	done | grep . >"$BATS_TEST_TMPDIR/all"
	sort -n -u "$BATS_TEST_TMPDIR/all" >"$BATS_TEST_TMPDIR/said"
	seq 0 319 | grep -vxFf "$BATS_TEST_TMPDIR/said" >"$1"
}

# accepted LINE: the accepted drafts of a run-spec K line
accepted() { sed -n 's/.* acceptance \([0-9]*\)\/.*/\1/p' <<<"$1"; }

# run-spec's K = 1..3 lines (in lines) identical to plain with drafts accepted, and the
# file $1.learned: every token said (the CPU's greedy ids), with its count of misses over
# the three K's runs, the strongest first
learned_verdict() {
	for k in 1 2 3; do
		[[ ${lines[$k]} == "K=$k "*"PASS (identical to plain)" ]]
		[ "$(accepted "${lines[$k]}")" -gt 0 ]
	done
	[ "${lines[4]}" = "SELF-CONSISTENCY PASS" ]
	sort -n "$BATS_TEST_TMPDIR/all" | uniq -c | awk '{ print $2, 3 * $1 }' | sort -k2,2nr -k1,1n >"$BATS_TEST_TMPDIR/want"
	diff "$BATS_TEST_TMPDIR/want" "$1.learned"
}

@test "assistant: MEMRA_GEMMA_TRIM_ADAPT learns the tokens its ranks miss: drafts land, the output stays plain's, <ranks>.learned lists them" {
	r=$BATS_TEST_TMPDIR/r.txt
	learned_setup "$r"
	n=$(wc -l <"$BATS_TEST_TMPDIR/said")
	spec() { run -0 --separate-stderr run-spec -t 2 --raw --jsonl --ignore-eos -K 1-3 -n 32 \
	    "$M/g4-dense+$M/g4-assistant" <"$BATS_TEST_TMPDIR/p.jsonl"; }
	MEMRA_GEMMA_DRAFT_RANKS=$r spec	# the ranks alone never draft a token the target says
	for k in 1 2 3; do
		[[ ${lines[$k]} == "K=$k "*" acceptance 0/"*"PASS (identical to plain)" ]]
	done
	[[ $stderr != *"trim adapt"* ]]
	[ ! -e "$r.learned" ]
	MEMRA_GEMMA_DRAFT_RANKS=$r MEMRA_GEMMA_TRIM_ADAPT=64 spec
	[[ $stderr == *"[gemma-draft] assistant drafter: 3 layers, hidden 24 over the trunk's K/V, head trimmed to $((320 - n)) rows (F32, d2t map)"* ]]
	[[ $stderr == *"[gemma-draft] trim adapt: $n learned slots after the $((320 - n)) ranks (all the tokens outside them), none learned yet (no $r.learned); the full head's 320 rows stay in memory for them (F32, 0.03 MiB), the slots' rows 0.00 MiB"* ]]
	[[ $stderr == *"[gemma-draft] trim adapt: $n learned slots written to $r.learned"* ]]
	learned_verdict "$r"
	# the next run starts from it
	MEMRA_GEMMA_DRAFT_RANKS=$r MEMRA_GEMMA_TRIM_ADAPT=64 spec
	[[ $stderr == *"[gemma-draft] trim adapt: $n learned slots after the $((320 - n)) ranks (all the tokens outside them), $n from $r.learned; "* ]]
	[[ ${lines[1]} == "K=1 "*"PASS (identical to plain)" ]]
	[ "$(accepted "${lines[1]}")" -gt 0 ]
}

@test "assistant: MEMRA_GEMMA_TRIM_ADAPT on a device's weights (cpu:copy, copied at load as CUDA's): each changed row replaced in the head's copy as slots fill and evict, every draft the CPU's" {
	learned_setup "$BATS_TEST_TMPDIR/r.txt"
	for d in cpu cpu:copy; do
		r=$BATS_TEST_TMPDIR/r-${d#*:}.txt
		cp "$BATS_TEST_TMPDIR/r.txt" "$r"
		# 2 slots for the tokens the ranks miss: they evict each other as counts pass
		MEMRA_GEMMA_DRAFT_RANKS=$r MEMRA_GEMMA_TRIM_ADAPT=2 run -0 --separate-stderr run-spec -t 2 \
		    --raw --jsonl --ignore-eos -K 1-3 -n 32 --device "$d" "$M/g4-dense+$M/g4-assistant" \
		    <"$BATS_TEST_TMPDIR/p.jsonl"
		[[ $stderr == *"[gemma-draft] trim adapt: 2 learned slots after the "* ]]
		for k in 1 2 3; do
			[[ ${lines[$k]} == "K=$k "*"PASS (identical to plain)" ]]
			[ "$(accepted "${lines[$k]}")" -gt 0 ]
		done
		# the report but its speeds: every draft accepted as the CPU's
		printf '%s\n' "${lines[@]}" | grep '^K=' | cut -d' ' -f1,5- >"$BATS_TEST_TMPDIR/k.${d#*:}"
	done
	diff "$BATS_TEST_TMPDIR/k.cpu" "$BATS_TEST_TMPDIR/k.copy"
	diff "$BATS_TEST_TMPDIR/r-cpu.txt.learned" "$BATS_TEST_TMPDIR/r-copy.txt.learned"
}

@test "assistant: MEMRA_GEMMA_TRIM_ADAPT leaves seeded sampling as it was (the draws read the ranks' rows only)" {
	r=$BATS_TEST_TMPDIR/r.txt
	learned_setup "$r"
	for a in 0 64; do
		MEMRA_GEMMA_DRAFT_RANKS=$r MEMRA_GEMMA_TRIM_ADAPT=$a run -0 run-spec -t 2 --raw --jsonl \
		    --ignore-eos -K 1-3 -n 32 --temp 0.8 --seed 5 "$M/g4-dense+$M/g4-assistant" <"$BATS_TEST_TMPDIR/p.jsonl"
		# the report but its speeds: the slots change between a run and its seeded rerun
		printf '%s\n' "${lines[@]}" | grep -v '^\[' | cut -d' ' -f1,5- >"$BATS_TEST_TMPDIR/sampled.$a"
	done
	[ -s "$r.learned" ]
	[ "$(grep -c 'PASS (identical to a seeded rerun)$' "$BATS_TEST_TMPDIR/sampled.64")" = 3 ]
	diff "$BATS_TEST_TMPDIR/sampled.0" "$BATS_TEST_TMPDIR/sampled.64"
}

@test "assistant: a malformed .learned file is an error with its line; an unwritable directory is said and the run goes on" {
	r=$BATS_TEST_TMPDIR/r.txt
	seq 0 99 >"$r"
	printf '300 2\n5 1\n' >"$r.learned"
	MEMRA_GEMMA_DRAFT_RANKS=$r MEMRA_GEMMA_TRIM_ADAPT=8 run -1 --separate-stderr run-spec -t 2 --raw -K 1 -n 4 \
	    "$M/g4-dense+$M/g4-assistant" hi
	[ "${stderr##*$'\n'}" = "run-spec: $M/g4-dense: draft '$M/g4-assistant': learned draft slots (MEMRA_GEMMA_TRIM_ADAPT): $r.learned: line 2: id 5 is in the rank list" ]
	printf '300 2\n301\n' >"$r.learned"
	MEMRA_GEMMA_DRAFT_RANKS=$r MEMRA_GEMMA_TRIM_ADAPT=8 run -1 --separate-stderr run-spec -t 2 --raw -K 1 -n 4 \
	    "$M/g4-dense+$M/g4-assistant" hi
	[[ ${stderr##*$'\n'} == *"$r.learned: line 2: not 'ID COUNT': '301'" ]]
	MEMRA_GEMMA_DRAFT_RANKS=$r MEMRA_GEMMA_TRIM_ADAPT=65537 run -2 --separate-stderr run-spec -t 2 --raw -K 1 -n 4 \
	    "$M/g4-dense+$M/g4-assistant" hi
	[ "$stderr" = "run-spec: MEMRA_GEMMA_TRIM_ADAPT: '65537': out of range 0..65536 or not a number" ]
	# /dev/fd: a directory no one can make a file in, root included
	MEMRA_GEMMA_DRAFT_RANKS=/dev/fd/3 MEMRA_GEMMA_TRIM_ADAPT=8 run -0 --separate-stderr run-spec -t 2 --raw \
	    --ignore-eos -K 1 -n 16 "$M/g4-dense+$M/g4-assistant" "hello world" 3<"$r"
	[[ ${lines[1]} == "K=1 "*"PASS (identical to plain)" ]]
	[[ $stderr == *"[gemma-draft] trim adapt: 8 learned slots after the 100 ranks, none learned yet (no /dev/fd/3.learned); "* ]]
	[[ $stderr == *"run-spec: MEMRA_GEMMA_TRIM_ADAPT: learned slots not saved: /dev/fd/3.learned: "* ]]
}

# bats test_tags=gpu
@test "on the CUDA backend: greedy ids equal the CPU's (argmax gate MATCH), batched decode bit-identical" {
	cuda_same "$M/g4-dense" "$M/g4-ple-shared" "$M/g4-moe-keqv" "$M/g4-h512"
}

# bats test_tags=gpu
@test "on the CUDA backend: recorded decode and verify steps (graphs) equal the host positions' bits" {
	export MEMRA_CUDA_UNVERIFIED=1
	for m in $MODELS; do
		steps_dpos_same "$M/$m" cuda
	done
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

# bats test_tags=gpu
@test "assistant on the CUDA backend: MEMRA_GEMMA_TRIM_ADAPT learns as on the CPU: each slot's row uploaded as it fills or changes, drafts land, the output stays plain's, the CPU's <ranks>.learned" {
	r=$BATS_TEST_TMPDIR/r.txt
	learned_setup "$r"
	n=$(wc -l <"$BATS_TEST_TMPDIR/said")
	MEMRA_GEMMA_DRAFT_RANKS=$r MEMRA_GEMMA_TRIM_ADAPT=64 run -0 --separate-stderr run-spec --raw --jsonl \
	    --ignore-eos -K 1-3 -n 32 --device cuda "$M/g4-dense+$M/g4-assistant" <"$BATS_TEST_TMPDIR/p.jsonl"
	[[ $stderr == *"[gemma-draft] trim adapt: $n learned slots after the $((320 - n)) ranks (all the tokens outside them), none learned yet (no $r.learned); "* ]]
	[[ $stderr == *"[gemma-draft] trim adapt: $n learned slots written to $r.learned"* ]]
	learned_verdict "$r"
}
