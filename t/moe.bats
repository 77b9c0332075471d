bats_require_minimum_version 1.5.0
# qwen35moe (the Qwen3.5 hybrid with every FFN a mixture of experts) on the
# CPU backend against transformers 5.17: the tiny random models of
# t/data/moe (tools/make-moe-models.py), their reference logits and greedy
# ids in refs.json, and llama.cpp's converter's GGUF of one of them.
setup() {
	load helper
	load arch
	arch_setup moe moe-e8k2-mtp moe-e4k1-tied moe-e6k2-r4
}

@test "HF checkpoints (per-expert tensors): logits of every position equal transformers' to 1e-4 relative" {
	need_py numpy
	for m in $MODELS; do
		run -0 --separate-stderr python3 "$TOP/t/peer/logits_vs_refs.py" "$ML" "$M/$m" "$M/$m/refs.json" 1e-4
		[ "${#lines[@]}" = 3 ]
	done
}

# llama.cpp's GGUF normalizes the GDN q and k its own way (x / max(|x|, eps), transformers
# x * rsqrt(|x|^2 + 1e-6)): on these random models that is 1.5e-4 relative at most (with
# transformers' rule the same file gives the HF path's 4e-6), so 2e-4 here.
@test "llama.cpp's converter's F32 GGUF: logits equal transformers' to 2e-4 relative" {
	need_py numpy
	run -0 --separate-stderr python3 "$TOP/t/peer/logits_vs_refs.py" "$ML" "$M/moe-e8k2-mtp/llamacpp-f32.gguf" "$M/moe-e8k2-mtp/refs.json" 2e-4
}

@test "quant-nvfp4's F32 GGUF gives llama.cpp's converter's GGUF's logits bit for bit" {
	quant-nvfp4 -t 2 --type F32 "$M/moe-e8k2-mtp" "$BATS_TEST_TMPDIR/a.gguf" 2>/dev/null
	"$ML" -t 2 "$BATS_TEST_TMPDIR/a.gguf" "$BATS_TEST_TMPDIR/ours" $IDS
	"$ML" -t 2 "$M/moe-e8k2-mtp/llamacpp-f32.gguf" "$BATS_TEST_TMPDIR/theirs" $IDS
	cmp "$BATS_TEST_TMPDIR/ours" "$BATS_TEST_TMPDIR/theirs"
}

@test "greedy ids equal transformers' (refs.json greedy), HF and GGUF, prefill and token by token" {
	need_py json
	for m in $MODELS; do
		want=$(refs_greedy "$M/$m")
		run -0 --separate-stderr "$MG" -t 2 -p "$M/$m" 16 5 17 250 3 99 42 7 1
		[ "$output" = "$want" ]
		run -0 --separate-stderr "$MG" -t 2 "$M/$m" 16 5 17 250 3 99 42 7 1
		[ "$output" = "$want" ]
	done
	run -0 --separate-stderr "$MG" -t 2 "$M/moe-e8k2-mtp/llamacpp-f32.gguf" 16 5 17 250 3 99 42 7 1
	[ "$output" = "$(refs_greedy "$M/moe-e8k2-mtp")" ]
}

@test "token-by-token logits agree with the prefill's to 1e-5 relative" {
	need_py numpy
	for m in $MODELS; do
		steps_agree "$M/$m"
	done
}

@test "batched decode is bit-identical to one sequence at a time (rows routed to different experts)" {
	for m in $MODELS; do
		batch_identical "$M/$m"
	done
}

# The MTP block (an MoE FFN too) is random: transformers never runs mtp.*, so nothing could
# train it, and greedy drafts are never accepted (run-spec then says so and exits 1); every K
# must still be identical to plain decode, and rejection sampling accepts some.
@test "run-spec K=1..8 on the MTP block of an MoE trunk: identical to plain decode (HF and GGUF)" {
	quant-nvfp4 -t 2 --type F32 "$M/moe-e8k2-mtp" "$BATS_TEST_TMPDIR/a.gguf" 2>/dev/null
	for m in "$M/moe-e8k2-mtp" "$BATS_TEST_TMPDIR/a.gguf"; do
		run -1 --separate-stderr run-spec --raw -K 1-8 -n 24 -t 2 --ignore-eos "$m" "hello world"
		[ "$(grep -c 'PASS (identical to plain)' <<<"$output")" = 8 ]
		! grep -q 'FAIL (' <<<"$output"
		[ "$(grep -vc 'acceptance 0 with a trained head' <<<"$stderr")" = 0 ]
		run -0 --separate-stderr run-spec --raw -K 1-8 -n 24 -t 2 --ignore-eos --temp 0.8 --seed 3 "$m" "hello world"
		[ "${lines[-1]}" = "SELF-CONSISTENCY PASS" ]
	done
}

@test "quant-nvfp4 makes the experts NVFP4 and keeps the routers F32 by default; the file runs" {
	quant-nvfp4 -t 2 "$M/moe-e8k2-mtp" "$BATS_TEST_TMPDIR/n.gguf" 2>/dev/null
	run -0 gguf-inspect "$BATS_TEST_TMPDIR/n.gguf"
	[[ $output == *"blk.0.ffn_gate_exps.weight           NVFP4    64x16x8 "* ]]
	[[ $output == *"blk.4.ffn_down_exps.weight           F16      16x64x8 "* ]]	# 16 columns: no NVFP4 nor Q8_0 block fits
	[[ $output == *"blk.0.ffn_gate_inp.weight            F32      64x8 "* ]]
	[[ $output == *"blk.0.ffn_gate_inp_shexp.weight      F32      64x1 "* ]]
	[[ $output == *"qwen35moe.expert_count                       uint32         8"* ]]
	[[ $output == *"qwen35moe.expert_used_count                  uint32         2"* ]]
	[[ $output == *"qwen35moe.expert_feed_forward_length         uint32         16"* ]]
	[[ $output == *"qwen35moe.expert_shared_feed_forward_length  uint32         24"* ]]
	run -0 --separate-stderr run-gen --raw -n 16 -t 2 "$BATS_TEST_TMPDIR/n.gguf" "hello world"
	[[ $stderr == *"MATCH"* ]]
	run -1 --separate-stderr run-spec --raw -K 1-3 -n 16 -t 2 --ignore-eos "$BATS_TEST_TMPDIR/n.gguf" "hello world"
	[ "$(grep -c 'PASS (identical to plain)' <<<"$output")" = 3 ]
}

@test "a config.json that disagrees with the experts on disk is an error naming the tensor" {
	need_py json
	d=$BATS_TEST_TMPDIR/m
	mkdir "$d"
	cp "$M/moe-e4k1-tied/"* "$d/"
	python3 - "$d/config.json" <<-'PY'
	import json, sys
	c = json.load(open(sys.argv[1])); c["num_experts"] = 5
	json.dump(c, open(sys.argv[1], "w"))
	PY
	run -1 --separate-stderr run-gen --raw -n 1 -t 2 "$d" hi
	[ "$stderr" = "run-gen: $d: tensor 'model.layers.0.mlp.gate.weight': GGUF shape {64, 4, 1, 1}, config.json implies {64, 5}" ]
	python3 - "$d/config.json" <<-'PY'
	import json, sys
	c = json.load(open(sys.argv[1])); c["num_experts"] = 4; c["moe_intermediate_size"] = 16
	json.dump(c, open(sys.argv[1], "w"))
	PY
	run -1 --separate-stderr run-gen --raw -n 1 -t 2 "$d" hi
	[ "$stderr" = "run-gen: $d: tensor 'model.layers.0.mlp.experts.0.down_proj.weight': not [64, 16] as config.json implies" ]
}

@test "frspec-owngen, trim-head and the attach paths (+draft, --draft, MEMRA_MTP_DRAFT, MEMRA_FRSPEC_TRIM) on an MoE trunk" {
	T=$BATS_TEST_TMPDIR
	quant-nvfp4 -t 2 --type F32 "$M/moe-e8k2-mtp" "$T/trunk.gguf" 2>/dev/null
	printf 'hello world\nthe cat sat\n' >"$T/p.txt"
	run -0 --separate-stderr frspec-owngen -t 2 --ngen 16 "$T/trunk.gguf" "$T/r.gguf" 64 "$T/p.txt"
	[ "$(wc -l <"$T/r.gguf.txt")" = 64 ]
	trim-head "$T/trunk.gguf" "$T/r.gguf.txt" "$T/d.gguf"
	spec="run-spec --raw -K 1-3 -n 16 -t 2 --ignore-eos --temp 0.8 --seed 3"
	run -0 --separate-stderr $spec "$T/trunk.gguf+$T/d.gguf" "hello world"
	[ "${lines[-1]}" = "SELF-CONSISTENCY PASS" ]
	[[ $stderr == *"[mtp-draft] external draft head: blk.4, head_vocab=64 (trimmed, d2t map)"* ]]
	run -0 --separate-stderr $spec --draft "$T/d.gguf" "$T/trunk.gguf" "hello world"
	[[ $stderr == *"[mtp-draft] external draft head: blk.4"* ]]
	MEMRA_MTP_DRAFT=$T/d.gguf run -0 --separate-stderr $spec "$T/trunk.gguf" "hello world"
	[[ $stderr == *"[mtp-draft] external draft head: blk.4"* ]]
	MEMRA_FRSPEC_TRIM=$T/r.gguf.txt run -0 --separate-stderr $spec "$T/trunk.gguf" "hello world"
	[ "${lines[-1]}" = "SELF-CONSISTENCY PASS" ]
	[[ $stderr == *"[frspec-trim] self-trimmed head: 64 rows of main output.weight (F32)"* ]]
}

# bats test_tags=gpu
@test "on the CUDA backend: greedy ids equal the CPU's (argmax gate MATCH), batched decode bit-identical" {
	quant-nvfp4 -t 2 --type Q8_0 "$M/moe-e8k2-mtp" "$BATS_TEST_TMPDIR/q8.gguf" 2>/dev/null
	cuda_same "$M/moe-e8k2-mtp" "$M/moe-e4k1-tied" "$M/moe-e6k2-r4" "$BATS_TEST_TMPDIR/q8.gguf"
}

# bats test_tags=gpu
@test "run-spec K=1..8 on the MTP block of an MoE trunk on the CUDA backend: identical to plain decode" {
	run -1 --separate-stderr run-spec --raw -K 1-8 -n 24 --ignore-eos --device cuda "$M/moe-e8k2-mtp" \
	    "hello world"
	[ "$(grep -c 'PASS (identical to plain)' <<<"$output")" = 8 ]
	! grep -q 'FAIL (' <<<"$output"
}
