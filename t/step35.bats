bats_require_minimum_version 1.5.0
# step35 (Step-3.5/3.7 Flash's text model) on the CPU backend against
# transformers 5.17's Step3p7ForConditionalGeneration: the tiny random models
# of t/data/step35 (tools/make-step35-models.py), their reference logits and
# greedy ids in refs.json.  step-a: full and sliding layers of 4 and 6 query
# heads, partial RoPE 0.5 / 1.0 at two thetas, a dense layer then MoE layers
# (8 experts, top 3, correction bias, scaling 2.5, shared expert), SwiGLU
# limits that bite; step-b: two dense layers, top 1 of 4, window 3, a query
# scale other than head_dim.
setup() {
	load helper
	load arch
	arch_setup step35 step-a step-b
}


@test "HF checkpoints: logits of every position equal transformers' to 1e-4 relative" {
	need_py numpy
	for m in $MODELS; do
		run -0 --separate-stderr python3 "$TOP/t/peer/logits_vs_refs.py" "$ML" "$M/$m" "$M/$m/refs.json" 1e-4
		[ "${#lines[@]}" = 3 ]
	done
}

@test "quant-nvfp4's F32 GGUF: llama.cpp's step35 names and metadata, the HF path's logits bit for bit" {
	for m in $MODELS; do
		quant-nvfp4 -t 2 --type F32 "$M/$m" "$BATS_TEST_TMPDIR/$m.gguf" 2>/dev/null
		"$ML" -t 2 "$BATS_TEST_TMPDIR/$m.gguf" "$BATS_TEST_TMPDIR/g" $IDS
		"$ML" -t 2 "$M/$m" "$BATS_TEST_TMPDIR/h" $IDS
		cmp "$BATS_TEST_TMPDIR/g" "$BATS_TEST_TMPDIR/h"
	done
	run -0 gguf-inspect "$BATS_TEST_TMPDIR/step-a.gguf"
	[[ $output == *'general.architecture                      string          "step35"'* ]]
	[[ $output == *"step35.attention.head_count               array[int32]    [4, 6, 6, 4]"* ]]
	[[ $output == *"step35.attention.sliding_window_pattern   array[bool]     [false, true, true, false]"* ]]
	[[ $output == *"step35.rope.freq_base_swa                 float32         10000"* ]]
	[[ $output == *"step35.expert_weights_scale               float32         2.5"* ]]
	[[ $output == *"step35.swiglu_clamp_exp                   array[float32]  [0, 0, 0.35, 0.3]"* ]]
	[[ $output == *"blk.1.exp_probs_b.bias       F32      8 "* ]]
	[[ $output == *"blk.1.ffn_gate_exps.weight   F32      32x16x8 "* ]]
	[[ $output == *"blk.1.attn_gate.weight       F32      32x6 "* ]]
	[[ $output == *"blk.0.ffn_gate.weight        F32      32x40 "* ]]
}

@test "greedy ids equal transformers' (refs.json greedy), HF and GGUF, prefill and token by token" {
	need_py json
	for m in $MODELS; do
		want=$(refs_greedy "$M/$m")
		run -0 --separate-stderr "$MG" -t 2 -p "$M/$m" 16 5 17 250 3 99 42 7 1
		[ "$output" = "$want" ]
		run -0 --separate-stderr "$MG" -t 2 "$M/$m" 16 5 17 250 3 99 42 7 1
		[ "$output" = "$want" ]
		quant-nvfp4 -t 2 --type F32 "$M/$m" "$BATS_TEST_TMPDIR/$m.gguf" 2>/dev/null
		run -0 --separate-stderr "$MG" -t 2 "$BATS_TEST_TMPDIR/$m.gguf" 16 5 17 250 3 99 42 7 1
		[ "$output" = "$want" ]
	done
}

@test "token-by-token logits agree with the prefill's to 1e-5 relative (past the window)" {
	need_py numpy
	for m in $MODELS; do
		steps_agree "$M/$m"
	done
}

@test "decode and verify steps at backend positions (recordable) equal the host positions' bits" {
	for m in $MODELS step-n; do
		steps_dpos_same "$M/$m"
	done
}

@test "batched decode is bit-identical to one sequence at a time" {
	for m in $MODELS; do
		batch_identical "$M/$m"
	done
}

@test "run-gen takes a step35 checkpoint: the argmax gate MATCHes (AVX2 and portable paths)" {
	run -0 --separate-stderr run-gen --raw -n 16 -t 2 "$M/step-a" "hello world"
	[[ $stderr == *"MATCH"* ]]
	run -0 --separate-stderr run-gen --raw -n 16 -t 2 --device cpu:scalar "$M/step-b" "hello world"
	[[ $stderr == *"MATCH"* ]]
}

@test "a config.json that disagrees with the weights is an error naming the tensor" {
	need_py json
	d=$BATS_TEST_TMPDIR/m
	mkdir "$d"
	cp "$M/step-b/"* "$d/"
	python3 - "$d/config.json" <<-'PY'
	import json, sys
	c = json.load(open(sys.argv[1])); c["text_config"]["n_routed_experts"] = 5
	json.dump(c, open(sys.argv[1], "w"))
	PY
	run -1 --separate-stderr run-gen --raw -n 1 -t 2 "$d" hi
	[ "$stderr" = "run-gen: $d: tensor 'model.layers.2.moe.down_proj.weight': not [5, 32, 16] as config.json implies" ]
}

# bats test_tags=gpu
@test "on the CUDA backend: greedy ids equal the CPU's (argmax gate MATCH), batched decode bit-identical" {
	cuda_same "$M/step-a" "$M/step-b" "$M/step-n"
}

# bats test_tags=gpu
@test "on the CUDA backend: recorded decode and verify steps (graphs) equal the host positions' bits" {
	export MEMRA_CUDA_UNVERIFIED=1
	for m in $MODELS step-n; do
		steps_dpos_same "$M/$m" cuda
	done
}

# bats test_tags=gpu
@test "run-spec through the NextN chain on the CUDA backend: K=1..8 identical to plain greedy" {
	# random blocks: greedy drafts are never accepted, so run-spec exits 1 (as on the CPU)
	run -1 --separate-stderr run-spec --raw -K 1-8 -n 24 --device cuda "$M/step-n" \
	    "hello world, this is"
	for k in 1 2 3 4 5 6 7 8; do
		[[ ${lines[$k]} == "K=$k "*"PASS (identical to plain)" ]]
	done
}

# step-n: step-a's shape with three NextN blocks (model.layers.4..6: a full dense
# block, then sliding MoE ones, each with its own head); refs.json's nextn holds
# each block's logits over every slot of one sequence, block k on block k-1's
# output before its head norm (block 0 on the trunk's before output_norm).
nextn_check() {	# OUT: the blocks' logits against refs.json's nextn, relative 1e-5
	python3 - "$1" "$M/step-n/refs.json" <<'PY'
import array, json, sys
got = array.array("f")
with open(sys.argv[1], "rb") as f:
    got.frombytes(f.read())
off = 0
for b, ref in enumerate(json.load(open(sys.argv[2]))["nextn"]["logits"]):
    flat = [v for row in ref for v in row]
    g = got[off:off + len(flat)]
    off += len(flat)
    err = max(abs(x - y) for x, y in zip(g, flat)) / max(abs(y) for y in flat)
    assert err < 1e-5, (b, err)
    print("block", b, len(ref), "slots, worst relative error %.2e" % err)
assert off == len(got)
PY
}

@test "NextN blocks (HF and quant-nvfp4's GGUF): each block's logits equal the reference, GGUF bit for bit" {
	NX=$TOP/build/t/tools/model-nextn
	ids=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["nextn"]["input_ids"])))' "$M/step-n/refs.json")
	"$NX" -t 2 "$M/step-n" "$BATS_TEST_TMPDIR/h" $ids
	run -0 nextn_check "$BATS_TEST_TMPDIR/h"
	[ "${#lines[@]}" = 3 ]
	quant-nvfp4 -t 2 --type F32 "$M/step-n" "$BATS_TEST_TMPDIR/n.gguf" 2>/dev/null
	"$NX" -t 2 "$BATS_TEST_TMPDIR/n.gguf" "$BATS_TEST_TMPDIR/g" $ids
	cmp "$BATS_TEST_TMPDIR/g" "$BATS_TEST_TMPDIR/h"
	run -0 gguf-inspect "$BATS_TEST_TMPDIR/n.gguf"
	[[ $output == *"step35.block_count                        uint32          7"* ]]
	[[ $output == *"step35.nextn_predict_layers               uint32          3"* ]]
	[[ $output == *"step35.attention.head_count               array[int32]    [4, 6, 6, 4, 4, 6, 6]"* ]]
	[[ $output == *"blk.5.nextn.shared_head_head.weight  F32      32x320 "* ]]
	[[ $output == *"blk.6.nextn.eh_proj.weight           F32      64x32 "* ]]
	[[ $output == *"blk.5.ffn_gate_exps.weight           F32      32x16x8 "* ]]
}

@test "run-spec through the NextN chain: K=1..8 identical to plain greedy (HF and GGUF)" {
	# the blocks are random, so greedy drafts are never accepted: run-spec says so and exits 1
	quant-nvfp4 -t 2 --type F32 "$M/step-n" "$BATS_TEST_TMPDIR/n.gguf" 2>/dev/null
	for m in "$M/step-n" "$BATS_TEST_TMPDIR/n.gguf"; do
		run -1 --separate-stderr run-spec --raw -K 1-8 -n 24 -t 2 "$m" "hello world, this is"
		for k in 1 2 3 4 5 6 7 8; do
			[[ ${lines[$k]} == "K=$k "*"PASS (identical to plain)" ]]
		done
		[ "${lines[9]}" = "SELF-CONSISTENCY FAIL" ]
		[[ $stderr == *"run-spec: K=8: acceptance 0 with a trained head"* ]]
	done
}

@test "run-spec through the NextN chain: sampled (temp 0.8) K=1..4 identical to the seeded rerun, drafts accepted" {
	run -0 --separate-stderr run-spec -K 1-4 --temp 0.8 --seed 11 -n 24 -t 2 "$M/step-n" "Once upon a time"
	for k in 1 2 3 4; do
		[[ ${lines[$k]} =~ ^K=$k\ .*acceptance\ [1-9][0-9]*/.*PASS\ \(identical\ to\ a\ seeded\ rerun\)$ ]]
	done
	[ "${lines[5]}" = "SELF-CONSISTENCY PASS" ]
}
