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

# field ROW N: the Nth tab-separated field of ROW
field() { cut -f"$2" <<<"$1"; }

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
	[[ ${lines[0]} == "model	"*"	qkt	auto	qk_stage	0	q6k_pack	0" ]]	# the backend's defaults
	[[ ${lines[1]} == "prefill-cold	ctx	20	"* ]]
	[[ ${lines[2]} == "prefill	ctx	20	"* ]]
	[[ ${lines[4]} == "decode-median	ctx	20	n	2	reps	1	"* ]]
	[[ ${lines[5]} == "verify	K	1	rows	2	"* ]]
	# -b: three sequences decoding together, as serve's steps do
	run -0 --separate-stderr "$T/model-bench" -d cpu -c 12 -n 2 -r 2 -k 0 -b 3 "$f"
	[[ ${lines[6]} == "decode-batch	B	3	ctx	12	rep	0	ms_per_step	"* ]]
	[[ ${lines[7]} == "decode-batch	B	3	ctx	12	rep	1	ms_per_step	"* ]]
	[[ ${lines[8]} == "decode-batch-median	B	3	ctx	12	n	2	reps	2	ms_per_step	"*"	x_step	"* ]]
	run -2 --separate-stderr "$T/model-bench" -d cpu -b 0 "$f"
	[ "$stderr" = "model-bench: bad -b: 1..256" ]
	# MEMRA_CUDA_QKT: the K-quant kernels' A/B (a no-op on the CPU), said on the model line
	MEMRA_CUDA_QKT=0 run -0 --separate-stderr "$T/model-bench" -d cpu -c 12 -n 2 -r 1 -k 0 "$f"
	[[ ${lines[0]} == "model	"*"	qkt	0	qk_stage	0	q6k_pack	0" ]]
	MEMRA_CUDA_QKT=yes run -2 --separate-stderr "$T/model-bench" -d cpu -c 12 "$f"
	[ "$stderr" = "model-bench: MEMRA_CUDA_QKT: 'yes': not 0, 1 or auto" ]
	# MEMRA_CUDA_QK_STAGE: the Q6_K product's rows staged or in place (a no-op on the CPU)
	MEMRA_CUDA_QK_STAGE=1 run -0 --separate-stderr "$T/model-bench" -d cpu -c 12 -n 2 -r 1 -k 0 "$f"
	[[ ${lines[0]} == "model	"*"	qkt	auto	qk_stage	1	q6k_pack	0" ]]
	MEMRA_CUDA_QK_STAGE=2 run -2 --separate-stderr "$T/model-bench" -d cpu -c 12 "$f"
	[ "$stderr" = "model-bench: MEMRA_CUDA_QK_STAGE: '2': not 0 or 1" ]
	# MEMRA_CUDA_Q6K_PACK: Q6_K weights packed four blocks a group or as in the file; the
	# model line says the backend's layout, and the CPU's is the file's whatever it is asked
	MEMRA_CUDA_Q6K_PACK=1 run -0 --separate-stderr "$T/model-bench" -d cpu -c 12 -n 2 -r 1 -k 0 "$f"
	[[ ${lines[0]} == "model	"*"	qkt	auto	qk_stage	0	q6k_pack	0" ]]
	MEMRA_CUDA_Q6K_PACK=on run -2 --separate-stderr "$T/model-bench" -d cpu -c 12 "$f"
	[ "$stderr" = "model-bench: MEMRA_CUDA_Q6K_PACK: 'on': not 0 or 1" ]
}

# GDN key heads of 80 (none of 16, 32, 64, 128), value heads of 64: the CPU runs them; spec
# decode equals greedy.  On cuda the prompt takes k_gdn_chunk<96, 80>, the decode k_gdn_pad<80>.
@test "gguf-random's tiny-k80 (GDN key heads of 80) decodes on the CPU, speculative equal to greedy" {
	f=$BATS_TEST_TMPDIR/k80.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny-k80 -t Q8_0 "$f"
	run -0 --separate-stderr gguf-inspect -k qwen35.ssm.state_size "$f"
	[ "$output" = "80" ]
	seq -s ' ' 3 5 370 >"$BATS_TEST_TMPDIR/case"	# 74 ids: a prefill of two chunks of 64 rows
	run -0 --separate-stderr "$T/model-spec" -d cpu -g cpu:scalar -K 2 -n 10 "$f" "$BATS_TEST_TMPDIR/case"
	[[ ${lines[1]} == "K=1 equal-greedy 1/1 "* ]]
	[[ ${lines[2]} == "K=2 equal-greedy 1/1 "* ]]
	[ "${lines[3]}" = "SELF-CONSISTENCY PASS" ]
	[[ ${lines[4]} == "GREEDY cpu-"*" = cpu-scalar: "*": PASS" ]]
}

# bats test_tags=gpu
@test "gguf-random's tiny-k80 (GDN key heads of 80) decodes on cuda as on the CPU" {
	f=$BATS_TEST_TMPDIR/k80.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny-k80 -t Q8_0 "$f"
	seq -s ' ' 3 5 370 >"$BATS_TEST_TMPDIR/case"	# 74 ids: a prefill of two chunks of 64 rows
	run -0 --separate-stderr "$T/model-spec" -d cuda -g cpu -K 2 -n 10 "$f" "$BATS_TEST_TMPDIR/case"
	[[ ${lines[1]} == "K=1 equal-greedy 1/1 "* ]]
	[[ ${lines[2]} == "K=2 equal-greedy 1/1 "* ]]
	[ "${lines[3]}" = "SELF-CONSISTENCY PASS" ]
	[[ ${lines[4]} == "GREEDY cuda"*" = cpu"*": PASS" ]]
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

@test "gguf-random refuses an unknown shape or type, and -L outside the shape" {
	run -2 --separate-stderr "$T/gguf-random" -p 70b "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -p '70b': not a shape (9b, 27b, tiny, tiny-k80, 35b-a3b, tiny-moe, 31b, 26b-a4b, tiny-gemma4, 196b-a11b, tiny-step, dflash2-27b, tiny-dflash2, 31b-assistant, tiny-gemma4-assistant, 31b-mmproj, 26b-mmproj, tiny-mmproj)" ]
	run -2 --separate-stderr "$T/gguf-random" -t Q9 "$BATS_TEST_TMPDIR/x.gguf"
	run -2 --separate-stderr "$T/gguf-random" -x Q9 "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -x 'Q9': not a type name" ]
	run -2 --separate-stderr "$T/gguf-random" -p tiny-step -L 6 "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -L 6: shape tiny-step has 5 layers" ]
	run -2 --separate-stderr "$T/gguf-random" -p tiny-gemma4 -L 5 "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -L 5: a gemma4 file needs -L 6 or more (a full-attention layer and a sliding one)" ]
	run -2 --separate-stderr "$T/gguf-random" -p 9b -L 0x "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -L '0x': not a layer count" ]
	run -2 --separate-stderr "$T/gguf-random" -n "$BATS_TEST_TMPDIR/x.gguf"
	[[ $stderr == "gguf-random: usage: "* ]]
	[ ! -e "$BATS_TEST_TMPDIR/x.gguf" ]
}

@test "gguf-random's qwen35moe, gemma4 and step35 tiny shapes load and decode in memra (id prompts)" {
	for p in tiny-moe:qwen35moe:5 tiny-gemma4:gemma4:6 tiny-step:step35:5; do
		f=$BATS_TEST_TMPDIR/${p%%:*}.gguf
		run -0 --separate-stderr "$T/gguf-random" -V -p "${p%%:*}" -t Q8_0 -x IQ4_XS "$f"
		run -0 --separate-stderr gguf-inspect -k general.architecture "$f"
		[ "$output" = "$(cut -d: -f2 <<<"$p")" ]
		run -0 --separate-stderr gguf-inspect -k "$output.block_count" "$f"
		[ "$output" = "${p##*:}" ]
		run -0 --separate-stderr run-gen --jsonl -t 2 --device cpu "$f" \
		    <<<'{"prompt": [5, 17, 250], "n": 5, "ignore_eos": true}'
		run -0 python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert len(r["ids"]) == 5 and r["prompt_tokens"] == 3 and r["gate"] == "MATCH", r' "${lines[0]}"
	done
}

@test "gguf-random's qwen35moe, gemma4 and step35 tiny shapes also load and evaluate in llama.cpp, with block fallbacks" {
	need_llama_cpp
	for a in "tiny-moe -t Q4_K" "tiny-gemma4 -t Q4_K" "tiny-step -t Q8_0 -x IQ4_XS" "tiny-step -L 2"; do
		f=$BATS_TEST_TMPDIR/x.gguf
		run -0 --separate-stderr "$T/gguf-random" -p $a "$f"
		run -0 --separate-stderr python3 -c 'import sys, math, llama_cpp
m = llama_cpp.Llama(sys.argv[1], n_ctx=64, verbose=False)
m.eval([5, 6, 7])
print(m.n_vocab(), len(m.scores[2]), all(math.isfinite(x) for x in m.scores[2]))' "$f"
		[ "$output" = "1000 1000 True" ]
	done
	# the rows of 128 and 96 that a Q4_K or IQ4_XS block (256) does not divide
	run -0 --separate-stderr "$T/gguf-random" -n -p tiny-moe -t Q4_K
	[[ $output == *$'blk.0.ffn_down_exps.weight\tQ5_0\t128x256x8\t'* ]]
	run -0 --separate-stderr "$T/gguf-random" -n -p tiny-step -t Q8_0 -x IQ4_XS
	[[ $output == *$'blk.1.ffn_up_exps.weight\tIQ4_XS\t256x128x8\t'* ]]
	[[ $output == *$'blk.1.ffn_down_exps.weight\tIQ4_NL\t128x256x8\t'* ]]
}

# The tensor counts by layer kind (llama.cpp's converter's layout) and the
# published sizes: 35B, 31B (30.7B), 26B (25.2B), 196B.
@test "gguf-random -n lists the big shapes' tensors: their counts by layer kind, their sizes the models' published ones" {
	params() { run -0 --separate-stderr "$T/gguf-random" -n "$@"; n=${lines[-1]}; n=${n#tensors }; }
	params -p 35b-a3b	# 30 GDN layers of 19, 10 full of 16, the MTP one of 20; embd, norm, output
	[ "${n%% *}" = $((30 * 19 + 10 * 16 + 20 + 3)) ]
	p=$(awk '{print $3}' <<<"$n"); [ "$p" -ge 35000000000 ] && [ "$p" -lt 36000000000 ]
	params -p 31b		# 50 sliding layers of 14, 10 global of 13 (no V); rope_freqs, embd, norm
	[ "${n%% *}" = $((50 * 14 + 10 * 13 + 3)) ]
	p=$(awk '{print $3}' <<<"$n"); [ "$p" -ge 30500000000 ] && [ "$p" -lt 31500000000 ]
	params -p 26b-a4b	# each layer 8 more: router, its scale, 2 expert stacks, their scale, 3 norms
	[ "${n%% *}" = $((25 * 22 + 5 * 21 + 3)) ]
	p=$(awk '{print $3}' <<<"$n"); [ "$p" -ge 25000000000 ] && [ "$p" -lt 26000000000 ]
	params -p 196b-a11b -t IQ4_XS	# 3 dense layers of 12, 42 MoE of 17; embd, norm, output
	[ "${n%% *}" = $((3 * 12 + 42 * 17 + 3)) ]
	p=$(awk '{print $3}' <<<"$n"); [ "$p" -ge 196000000000 ] && [ "$p" -lt 197000000000 ]
	b=$(awk '{print $5}' <<<"$n"); [ "$b" -gt 64000000000 ]	# over a 64 GB disk: -L
	params -p 196b-a11b -t Q8_0 -x IQ4_XS -L 24
	[ "${n%% *}" = $((3 * 12 + 21 * 17 + 3)) ]
	b=$(awk '{print $5}' <<<"$n"); [ "$b" -lt 64000000000 ]
	[[ $output == *$'\nblk.23.ffn_up_exps.weight\tIQ4_XS\t4096x1280x288\t'* ]]
	[[ $output != *$'\nblk.24.'* ]]
}

# gguf-random's Gemma-4 assistants (issue 28): 31b-assistant the 31B's drafter (its published
# 470M parameters), tiny-gemma4-assistant tiny-gemma4's (4 layers of 128 over its 256).

# asst_trunk: tiny-gemma4 ($P/trunk.gguf, Q8_0), its drafter ($P/a.gguf, NVFP4) and three
# prompts ($P/p.jsonl); sets P
asst_trunk() {
	P=$BATS_TEST_TMPDIR
	run -0 --separate-stderr "$T/gguf-random" -p tiny-gemma4 -t Q8_0 "$P/trunk.gguf"
	run -0 --separate-stderr "$T/gguf-random" -p tiny-gemma4-assistant -t NVFP4 "$P/a.gguf"
	printf '%s\n' '{"prompt": [5, 17, 250, 3, 99]}' '{"prompt": "hello world, this is"}' \
	    '{"prompt": [7, 7, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]}' \
	    >"$P/p.jsonl"
}

@test "gguf-random's tiny Gemma-4 assistant drafts for tiny-gemma4: run-spec K=1..4 identical to plain, NVFP4 and BF16" {
	asst_trunk
	run -0 --separate-stderr gguf-inspect -k general.architecture "$P/a.gguf"
	[ "$output" = gemma4-assistant ]
	# its head trimmed to the trunk's own continuations (a random drafter's full head
	# drafts what the trunk never says): drafts land, the output is still plain's
	run-gen --jsonl --ids -t 2 --device cpu --ignore-eos -n 32 "$P/trunk.gguf" <"$P/p.jsonl" 2>/dev/null |
	    jq -r '.ids[]' | sort -un >"$P/r.txt"
	n=$(wc -l <"$P/r.txt")
	[ "$n" -ge 1 ]
	run -0 --separate-stderr "$T/gguf-random" -p tiny-gemma4-assistant "$P/a-bf16.gguf"
	for a in "a.gguf:Q5_1" "a-bf16.gguf:BF16"; do
		MEMRA_GEMMA_DRAFT_RANKS=$P/r.txt run -0 --separate-stderr run-spec --raw --jsonl -t 2 \
		    --ignore-eos -K 1-4 -n 32 "$P/trunk.gguf+$P/${a%%:*}" <"$P/p.jsonl"
		[[ $stderr == *"[gemma-draft] assistant drafter: 4 layers, hidden 128 over the trunk's K/V, head trimmed to $n rows (${a##*:}, d2t map)"* ]]
		[[ ${lines[0]} == "plain "*" tok/s (96 tokens, 3 prompts)" ]]
		for k in 1 2 3 4; do
			[[ ${lines[$k]} == "K=$k "*" acceptance "*" PASS (identical to plain)" ]]
		done
		[ "${lines[5]}" = "SELF-CONSISTENCY PASS" ]
	done
}

@test "gguf-random's Gemma-4 assistants are laid out as memra's HF plan lays out a gemma4_assistant checkpoint: keys, tensors, shapes; the 31B's 470M parameters" {
	P=$BATS_TEST_TMPDIR
	# a checkpoint of tiny-gemma4-assistant's shape (zeros), converted by the plan
	python3 - "$P/hf" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
os.makedirs(d)
H, Hb, L, F, nh, V = 128, 256, 4, 256, 4, 1000
types = ["sliding_attention"] * 3 + ["full_attention"]
tc = {"model_type": "gemma4_text", "hidden_size": H, "num_hidden_layers": L,
      "intermediate_size": F, "num_attention_heads": nh, "num_key_value_heads": 2, "head_dim": 64,
      "global_head_dim": 128, "num_global_key_value_heads": 1, "attention_k_eq_v": True,
      "layer_types": types, "sliding_window": 64, "vocab_size": V,
      "max_position_embeddings": 262144, "num_kv_shared_layers": L,
      "hidden_size_per_layer_input": 0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
      "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1e6,
                                             "rope_type": "proportional"},
                          "sliding_attention": {"rope_theta": 1e4, "rope_type": "default"}}}
json.dump({"model_type": "gemma4_assistant", "backbone_hidden_size": Hb, "text_config": tc,
           "tie_word_embeddings": True}, open(d + "/config.json", "w"))
t = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H],
     "pre_projection.weight": [H, 2 * Hb], "post_projection.weight": [Hb, H]}
for i, ty in enumerate(types):
    hd, p = 64 if ty[0] == "s" else 128, "model.layers.%d." % i
    for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
              "post_feedforward_layernorm"):
        t[p + n + ".weight"] = [H]
    t[p + "layer_scalar"] = [1]
    t.update({p + "self_attn.q_proj.weight": [nh * hd, H], p + "self_attn.o_proj.weight": [H, nh * hd],
              p + "self_attn.q_norm.weight": [hd], p + "mlp.gate_proj.weight": [F, H],
              p + "mlp.up_proj.weight": [F, H], p + "mlp.down_proj.weight": [H, F]})
hdr, off = {}, 0
for n, s in t.items():
    k = 4
    for x in s:
        k *= x
    hdr[n] = {"dtype": "F32", "shape": s, "data_offsets": [off, off + k]}
    off += k
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(d + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + bytes(off))
PY
	cp "$DATA/gemma4/g4-vision/tokenizer.json" "$P/hf/"
	run -0 --separate-stderr quant-nvfp4 --type F32 "$P/hf" "$P/plan.gguf"
	run -0 --separate-stderr "$T/gguf-random" -V -p tiny-gemma4-assistant -t F32 -e F32 "$P/r.gguf"
	# the gemma4-assistant keys (values too) and the tensor table (order, types, shapes)
	lay() { gguf-inspect "$1" | awk '$1 ~ /^gemma4-assistant\./ || /^  (token_embd|blk|output|nextn|rope_freqs)/ { print $1, $2, $3, $4 }'; }
	lay "$P/plan.gguf" >"$P/plan.txt"
	[ "$(wc -l <"$P/plan.txt")" = $((21 + 49)) ]
	lay "$P/r.gguf" | diff "$P/plan.txt" -
	# the 31B's: 4 layers of 11 (3 sliding, one global, heads of 512), the token table,
	# output_norm, the two projections, rope_freqs: 470M (google/gemma-4-31B-it's
	# assistant), the global layer's queries 32 x 512
	run -0 --separate-stderr "$T/gguf-random" -n -p 31b-assistant
	[ "${lines[-1]}" = "tensors 49 params 469518852 bytes 939075600" ]
	[[ $output == *$'\nblk.3.attn_q.weight\tBF16\t1024x16384\t'* ]]
	[[ $output == *$'\nblk.2.attn_q.weight\tBF16\t1024x8192\t'* ]]
	[[ $output == *$'\nnextn.pre_projection.weight\tBF16\t10752x1024\t'* ]]
	[[ $output == *$'\nnextn.post_projection.weight\tBF16\t1024x5376\t'* ]]
	run -0 --separate-stderr "$T/gguf-random" -n -p 31b-assistant -t NVFP4
	[[ $output == *$'token_embd.weight\tQ5_K\t1024x262144\t'* ]]
	[[ $output == *$'\nblk.0.ffn_down.weight\tNVFP4\t8192x1024\t'* ]]
}

@test "a Gemma-4 assistant of another trunk's width is refused by the loader with its reason: the 31B's and tiny-gemma4's both ways" {
	asst_trunk
	G=$DATA/gemma4
	run -0 --separate-stderr "$T/gguf-random" -V -p 31b-assistant -t TQ1_0 "$P/a31.gguf"
	run -1 --separate-stderr run-spec --raw -t 2 -K 1 -n 4 "$P/trunk.gguf+$P/a31.gguf" hi
	[ "${stderr_lines[-1]}" = "run-spec: $P/trunk.gguf: draft '$P/a31.gguf': drafts for a trunk of hidden size 5376 and 262144 tokens, not this one's 256 and 1000" ]
	run -1 --separate-stderr run-spec --raw -t 2 -K 1 -n 4 "$G/g4-dense+$P/a.gguf" hi
	[ "${stderr_lines[-1]}" = "run-spec: $G/g4-dense: draft '$P/a.gguf': drafts for a trunk of hidden size 256 and 1000 tokens, not this one's 32 and 320" ]
	MEMRA_DRAFT=$G/g4-assistant run -1 --separate-stderr run-spec --raw -t 2 -K 1 -n 4 "$P/trunk.gguf" hi
	[ "${stderr_lines[-1]}" = "run-spec: $P/trunk.gguf: draft '$G/g4-assistant': drafts for a trunk of hidden size 32 and 320 tokens, not this one's 256 and 1000" ]
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

# two free TCP ports of 127.0.0.1, as "A B"
free_ports() {
	python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])'
}

# 0 when something accepts connections on 127.0.0.1:$1
port_open() {
	python3 -c 'import socket, sys
s = socket.socket(); s.settimeout(2)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)' "$1"
}

@test "serve-abba benchmarks each arm's own server and leaves none behind: a port already taken is refused, and a SIGTERM mid-run stops the server that runs" {
	P=$BATS_TEST_TMPDIR
	f=$P/tiny.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t Q8_0 "$f"
	read -r pa pb <<<"$(free_ports)"
	srv() { echo "MEMRA_MODELS=r=$f MEMRA_MAX_SESSIONS=2 MEMRA_CTX=96 MEMRA_HOST=127.0.0.1 MEMRA_PORT=$1 $TOP/bin/serve --device cpu -t 1"; }
	abba() { python3 "$TOP/tools/serve-abba.py" -a "$(srv "$pa")" -b "$(srv "$pb")" --port-a "$pa" --port-b "$pb" "$@"; }
	run -0 abba --bench "-c 1 -n 1 -p 8 -g 4 --vocab 1000" --tsv "$P/r.tsv" --log "$P/r.log"
	[ "$(grep -c '^== ' "$P/r.log")" = 4 ]
	[ "$(grep -c $'\tserve-c1\t' "$P/r.tsv")" = 1 ]
	run -1 port_open "$pa"
	run -1 port_open "$pb"
	# a listener on A's port (a server left from an earlier run): refused before any run
	python3 -c 'import socket, time, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(60)' "$pa" &
	L=$!
	for _ in $(seq 50); do port_open "$pa" && break; sleep 0.1; done
	run -1 --separate-stderr abba --bench "-c 1 -n 1 -p 8 -g 4 --vocab 1000" --log "$P/x.log"
	kill "$L"; wait "$L" || true
	[ "$stderr" = "serve-abba: port $pa: something listens there before the server starts (a server left from an earlier run?)" ]
	[ ! -s "$P/x.log" ]
	# SIGTERM while A's server answers a long bench: serve-abba stops it before exiting
	python3 "$TOP/tools/serve-abba.py" -a "$(srv "$pa")" -b "$(srv "$pb")" --port-a "$pa" \
	    --port-b "$pb" --bench "-c 1 -n 40 -p 8 -g 80 --vocab 1000" --log "$P/t.log" 2>/dev/null &
	A=$!
	for _ in $(seq 300); do grep -q '"POST /v1/completions\|request 1:' "$P/t.log" 2>/dev/null && break; sleep 0.1; done
	port_open "$pa"
	kill -TERM "$A"
	st=0; wait "$A" || st=$?
	[ "$st" = 143 ]
	run -1 port_open "$pa"
	[ -z "$(pgrep -f "MEMRA_PORT=$pa")" ]
}

@test "serve-turns idturns: conversations by token ids (prompts and replies as ids, return_token_ids); a later turn reports the tokens it did not recompute" {
	load serve
	P=$BATS_TEST_TMPDIR
	f=$P/tiny.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t Q8_0 "$f"
	start_serve MEMRA_MODELS="r=$f" MEMRA_MAX_SESSIONS=2 MEMRA_CTX=160 MEMRA_PREFILL_CHUNK=32
	run -0 --separate-stderr python3 "$TOP/tools/serve-turns.py" "$URL" idturns -c 2 -t 3 -p 40 -q 8 -g 6 --vocab 1000 --turns-log "$P/t.jsonl"
	stop_serve
	[ "$(jq -r '[.c, .turns, .first, .new, .gen] | @tsv' <<<"$output")" = "2	3	40	8	6" ]
	jq -e '.turn1_ttft_ms > 0 and .turnN_ttft_ms > 0 and .agg_tok_s > 0 and .cached_tokens > 0' <<<"$output"
	# each conversation: 48 ids, then 48 + 6 + 8, then 62 + 6 + 8; cold first, then resumed
	[ "$(jq -r '[.conversation, .turn, .prompt_tokens] | @tsv' "$P/t.jsonl" | sort | tr '\t\n' ' ,')" = "0 1 48,0 2 62,0 3 76,1 1 48,1 2 62,1 3 76," ]
	[ "$(jq -r 'select(.turn == 1) | .cached_tokens' "$P/t.jsonl" | sort -u)" = 0 ]
	[ "$(jq -r 'select(.turn == 2) | .cached_tokens' "$P/t.jsonl" | sort -u)" = 32 ]
	# a server that cannot answer: the run fails, naming why
	run -1 --separate-stderr python3 "$TOP/tools/serve-turns.py" "$URL" idturns -c 1 -t 1 -p 4 -q 4 -g 2
	[[ $stderr == "serve-turns: "*"Connection refused"* ]]
}

@test "gpu-cookbook boots the cookbook's long-context, Ornith and DFlash2 blocks on gguf-random files (trim-head's drafts, a random drafter), checks their proof lines and serves a completion each, the DFlash2 replies plain's (small shapes and context on the CPU)" {
	P=$BATS_TEST_TMPDIR
	# the four blocks named (the gemma block, by default too, has a test of its own)
	run -0 --separate-stderr env TMPDIR="$P" COOKBOOK_BLOCKS="long ornith ornith-ranks dflash" \
	    COOKBOOK_SHAPE_27B=tiny COOKBOOK_SHAPE_ORNITH=tiny-moe \
	    COOKBOOK_SHAPE_DFLASH=tiny-dflash2 COOKBOOK_TYPE=Q8_0 COOKBOOK_DEVICE=cpu COOKBOOK_TRIM=512 \
	    COOKBOOK_CTX=4096 COOKBOOK_PREFIX_MB=64 sh "$TOP/tools/gpu-cookbook.sh" "$P/o"
	g=$P/memra-gguf
	[ "${lines[0]}" = "== long: the 27B long-context block on qwen35-tiny-random-Q8_0.gguf (cpu)" ]
	# the drafts are trim-head's of the trunks' MTP blocks, attached with the cookbook's proof line
	[[ $output == *"[mtp-draft] external draft head: blk.4, source=output.weight, head_vocab=512 (trimmed, d2t map)"* ]]
	[[ $output == *"[worker] q38: regime draft attached ($g/qwen35-tiny-random-Q8_0-frspec-sxc512.gguf)"* ]]
	[[ $output == *"[worker] ornith: regime draft attached ($g/qwen35-tiny-moe-random-Q8_0-frspec-owngen512.gguf)"* ]]
	[[ $output == *"[frspec-trim] self-trimmed head: 512 rows of main output.weight (Q8_0)"* ]]
	# the DFlash2 block: its drafter armed and trimmed, its replies (K by load, K pinned at 7) plain's
	[[ $output == *"[dspark] q38: DFlash2 drafter $g/tiny-dflash2-random-BF16.gguf: 2 layers, block 8, taps [0,2], window 16, weights Q4_0"* ]]
	[[ $output == *"[dspark] q38: DFlash2 draft head TRIMMED to 512 rows"* ]]
	[ "$(grep -c '^K \(load\|k7\): 4 greedy replies (24 ids each) = plain.s$' <<<"$output")" = 2 ]
	[[ $output == *"K=7: "[1-9]*" rounds drafted"* ]]
	# what the long block's sessions cost is said
	[[ $output == *"[sched] q38: 32 sessions x ctx 4096: "*" MiB each, "* ]]
	[[ $output == *"[sched] q38: prefix cache: "*" MiB, "*" blocks of 64 tokens"* ]]
	[ "$(grep -c '^proof line: present' <<<"$output")" = 8 ]
	[ "$(grep -c '^completion: HTTP 200, 64 tokens of 64 in ' <<<"$output")" = 4 ]
	[ "$(grep -E '^(long|ornith|ornith-ranks|dflash): ' <<<"$output" | tr '\n' ' ')" = "long: PASS ornith: PASS ornith-ranks: PASS dflash: PASS " ]
	[ "${lines[-1]}" = "COOKBOOK BOOT PASS" ]
	# a trim past the vocabulary, or a block it does not know, is refused before anything boots
	run -2 --separate-stderr env TMPDIR="$P" COOKBOOK_SHAPE_27B=tiny COOKBOOK_TYPE=Q8_0 COOKBOOK_DEVICE=cpu \
	    COOKBOOK_BLOCKS=long COOKBOOK_TRIM=5000 sh "$TOP/tools/gpu-cookbook.sh" "$P/o2"
	[ "$stderr" = "gpu-cookbook.sh: trim 5000: past the vocabulary (1000)" ]
	run -2 --separate-stderr env COOKBOOK_BLOCKS="long llama" sh "$TOP/tools/gpu-cookbook.sh" "$P/o3"
	[ "$stderr" = "gpu-cookbook.sh: block 'llama': not long, ornith, ornith-ranks, dflash or gemma" ]
}

@test "gpu-cookbook boots the cookbook's Gemma-4 block (assistant drafter, ranks, TRIM_ADAPT=512, vision) unchanged on gguf-random files: its proof lines, a completion, an image answered (small shapes and context on the CPU)" {
	P=$BATS_TEST_TMPDIR
	run -0 --separate-stderr env TMPDIR="$P" COOKBOOK_BLOCKS=gemma COOKBOOK_SHAPE_GEMMA=tiny-gemma4 \
	    COOKBOOK_SHAPE_GEMMA_ASST=tiny-gemma4-assistant COOKBOOK_SHAPE_GEMMA_MMPROJ=tiny-mmproj \
	    COOKBOOK_DEVICE=cpu COOKBOOK_TRIM=256 COOKBOOK_CTX=4096 COOKBOOK_PREFIX_MB=64 \
	    sh "$TOP/tools/gpu-cookbook.sh" "$P/o"
	g=$P/memra-gguf
	[ "${lines[0]}" = "== gemma: the Gemma-4 31B vision + drafter block on gemma4-tiny-gemma4-random-Q6_K.gguf + gemma4-tiny-gemma4-assistant-random-NVFP4.gguf + gemma4-tiny-mmproj-random-BF16.gguf (cpu)" ]
	# the block's variables as the cookbook writes them, the files in place of its paths
	[[ $output == *"[mtp-draft] loading external MTP draft: $g/gemma4-tiny-gemma4-assistant-random-NVFP4.gguf"* ]]
	[[ $output == *"[gemma-draft] assistant drafter: 4 layers, hidden 128 over the trunk's K/V, head trimmed to 256 rows (Q5_1, d2t map)"* ]]
	[[ $output == *"[gemma-draft] trim adapt: 512 learned slots after the 256 ranks, none learned yet (no $P/o/gemma31b-ranks-256.gguf.txt.learned); "* ]]
	[[ $output == *"[model] gemma31: ctx=4096 K=3 (assistant speculative decode for greedy requests)"* ]]
	[[ $output == *"[sched] gemma31: 16 sessions x ctx 4096: "* ]]
	[[ $output == *"[sched] gemma31: prefix cache: 63 MiB, "* ]]
	[[ $output == *"[vision] gemma4 tower: 2 layers, hidden 64, patch 16, pool 3, 280 soft tokens an image at most, image rows bidirectional ($g/gemma4-tiny-mmproj-random-BF16.gguf)"* ]]
	[ "$(grep -c '^proof line: present' <<<"$output")" = 5 ]
	[ "$(grep -c '^completion: HTTP 200, 64 tokens of 64 in ' <<<"$output")" = 1 ]
	# the image: 280 soft tokens and their markers before the question
	[[ $output == *$'\nimage chat: HTTP 200, 16 tokens of 16, 318 prompt tokens (the image\'s soft tokens in them) in '* ]]
	[ "$(jq -r '.choices[0].finish_reason' "$P/o/gemma-image-reply.json")" = length ]
	[ "${lines[-2]}" = "gemma: PASS" ]
	[ "${lines[-1]}" = "COOKBOOK BOOT PASS" ]
	# the ranks are the first 256 ids; the drain kept what the slots learned beside them
	[ "$(cat "$P/o/gemma31b-ranks-256.gguf.txt")" = "$(seq 0 255)" ]
	grep -q "^\[gemma-draft\] gemma31: trim adapt: [0-9]* learned slots written to $P/o/gemma31b-ranks-256.gguf.txt.learned\$" "$P/o/gemma-boot-1.log"
	# the 31B's drafter on the tiny trunk: the loader's refusal, said as the block's
	run -1 --separate-stderr env TMPDIR="$P" COOKBOOK_BLOCKS=gemma COOKBOOK_SHAPE_GEMMA=tiny-gemma4 \
	    COOKBOOK_SHAPE_GEMMA_MMPROJ=tiny-mmproj COOKBOOK_DEVICE=cpu COOKBOOK_TRIM=256 \
	    COOKBOOK_CTX=4096 COOKBOOK_PREFIX_MB=64 sh "$TOP/tools/gpu-cookbook.sh" "$P/o2"
	[ "${lines[-4]}" = "refused: memra-server: $g/gemma4-tiny-gemma4-random-Q6_K.gguf: draft '$g/gemma4-31b-assistant-random-NVFP4.gguf': drafts for a trunk of hidden size 5376 and 262144 tokens, not this one's 256 and 1000" ]
	[ "${lines[-3]}" = "the refusal names no setting that fits" ]
	[ "${lines[-2]}" = "gemma: FAIL" ]
	[ "${lines[-1]}" = "COOKBOOK BOOT FAIL (1 of the blocks)" ]
}

# gguf-random's DFlash2 drafters (issue 31): tiny-dflash2 fits the tiny trunk (hidden 256,
# vocabulary 1000, 4 layers: taps 0 and 2), dflash2-27b the 27b one (Qwen3.8-27B-DFlash2's
# published shape).  A drafter has no embedding or head: it reads its trunk's.

# dflash_trunk: the tiny trunk ($P/trunk.gguf, Q8_0) and its drafter ($P/d.gguf, BF16); sets P
dflash_trunk() {
	P=$BATS_TEST_TMPDIR
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t Q8_0 "$P/trunk.gguf"
	run -0 --separate-stderr "$T/gguf-random" -p tiny-dflash2 "$P/d.gguf"
}

# dflash_layout GGUF: its tensors and dflash keys as t/data/dflash/llamacpp-header.txt has
# them (tools/make-dflash-fixture.py's dump), each tensor's ne as the formula of the file's
# own hyper-parameters it equals (H hidden, F FFN, D head, Q D x heads, KV D x K/V heads,
# R selector rank, K conv kernel, P 2 K H / group, T taps, V the codebooks' rows), or
# "ne?" with its numbers when it equals none; the values of the keys left out
dflash_layout() {
	python3 - "$1" <<'PY'
import json, re, sys
if sys.argv[1].endswith(".txt"):
    lines = open(sys.argv[1]).read().split("\n")
    kv = {l.split(" = ")[0]: json.loads(l.split(" = ")[1]) for l in lines if " = " in l}
    ts = [l.split() for l in lines if l and " = " not in l]
else:
    import gguf
    r = gguf.GGUFReader(sys.argv[1])
    ts = [[t.name, t.tensor_type.name, ",".join(str(int(x)) for x in t.shape)] for t in r.tensors]
    kv = {f.name: f.contents() for f in r.fields.values()
          if f.name.startswith("dflash.") or f.name in ("general.architecture",
                                                       "tokenizer.ggml.mask_token_id")}
g = lambda k: kv["dflash." + k]
H, F, D = g("embedding_length"), g("feed_forward_length"), g("attention.key_length")
R, K = g("selector_rank"), g("conv_kernel_size")
V = [int(t[2].split(",")[1]) for t in ts if t[0] == "selector_predecessor.weight"][0]
sym = {"H": H, "F": F, "D": D, "Q": D * g("attention.head_count"),
       "KV": D * g("attention.head_count_kv"), "R": R, "K": K, "V": V,
       "P": 2 * K * H // g("conv_group_size"), "TH": len(g("target_layers")) * H, "2": 2}
want = {"selector_hidden.weight": "H,R", "selector_predecessor.weight": "R,V",
        "selector_successor.weight": "R,V", "fc.weight": "TH,H", "enc.output_norm.weight": "H",
        "output_norm.weight": "H", "attn_conv_base": "H,K,2", "ffn_conv_base": "H,K,2",
        "attn_conv_proj.weight": "H,P", "ffn_conv_proj.weight": "H,P", "attn_norm.weight": "H",
        "ffn_norm.weight": "H", "ffn_down.weight": "F,H", "ffn_gate.weight": "H,F",
        "ffn_up.weight": "H,F", "attn_k_norm.weight": "D", "attn_q_norm.weight": "D",
        "attn_k.weight": "H,KV", "attn_v.weight": "H,KV", "attn_q.weight": "H,Q",
        "attn_output.weight": "Q,H"}
for name, typ, ne in ts:
    w = want.get(re.sub(r"^blk\.[0-9]+\.", "", name))
    ok = w is not None and [sym[x] for x in w.split(",")] == [int(x) for x in ne.split(",")]
    print(name, typ, w if ok else "ne? " + ne)
for k in kv:
    print(k)
PY
}

@test "gguf-random's tiny DFlash2 drafter drafts on the tiny trunk: run-spec's identity gate PASSes, K=1..7, each weight type" {
	dflash_trunk
	printf '%s\n' '{"prompt": [5, 17, 250, 3, 99]}' '{"prompt": "hello world, this is"}' \
	    '{"prompt": [7, 7, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]}' \
	    >"$P/p.jsonl"
	armed() { MEMRA_DSPARK_SPEC=1 run-spec --raw --jsonl -t 2 --ignore-eos "$@" "$P/trunk.gguf" <"$P/p.jsonl"; }
	# armed by the flags (--dspark-spec 1 --dspark-draft), then by their variables
	run -0 --separate-stderr run-spec --raw --jsonl -t 2 --ignore-eos --dspark-spec 1 \
	    --dspark-draft "$P/d.gguf" -K 1-7 -n 32 "$P/trunk.gguf" <"$P/p.jsonl"
	[ "${stderr_lines[0]}" = "[dspark] arming DFlash2 disables MTP spec (the trunk's MTP head stays unused)" ]
	# the taps print as the trunk's layer ids (target_layers [1, 3]: a layer's input)
	[ "${stderr_lines[1]}" = "[dspark] trunk.gguf: DFlash2 drafter $P/d.gguf: 2 layers, block 8, taps [0,2], window 16, weights Q4_0" ]
	[[ ${lines[0]} == "plain "*" tok/s (96 tokens, 3 prompts)" ]]
	for k in 1 2 3 4 5 6 7; do
		[[ ${lines[$k]} == "K=$k "*" acceptance "*" PASS (identical to plain)" ]]
	done
	[ "${lines[8]}" = "SELF-CONSISTENCY PASS" ]
	# the head trimmed to the trunk's own continuation of the first prompt: drafts there
	# are the trunk's tokens, some accepted; the output still plain's
	run -0 --separate-stderr run-gen --jsonl --ids -t 2 --device cpu "$P/trunk.gguf" \
	    <<<'{"prompt": [5, 17, 250, 3, 99], "n": 8, "ignore_eos": true}'
	jq -r '.ids[]' <<<"${lines[0]}" | sort -un >"$P/r.txt"
	[ "$(wc -l <"$P/r.txt")" -ge 2 ]
	MEMRA_FRSPEC_TRIM=$P/r.txt MEMRA_DSPARK_DRAFT=$P/d.gguf run -0 --separate-stderr armed -n 32
	[ "${stderr_lines[2]}" = "[dspark] trunk.gguf: DFlash2 draft head TRIMMED to $(wc -l <"$P/r.txt") rows" ]
	[[ ${lines[1]} == "K=7 "*" PASS (identical to plain)" ]]
	# F16, F32, Q8_0 (its codebooks of 32-wide rows too) and Q4_K (Q5_0 codebooks) drafters,
	# kept as written (MEMRA_DFLASH_PREC=keep)
	for t in F16 F32 Q8_0 Q4_K; do
		run -0 --separate-stderr "$T/gguf-random" -p tiny-dflash2 -t $t "$P/d-$t.gguf"
		MEMRA_DFLASH_PREC=keep MEMRA_DSPARK_DRAFT=$P/d-$t.gguf run -0 --separate-stderr armed -K 7 -n 16
		[[ ${stderr_lines[1]} == *", weights $t" ]]
		[[ ${lines[1]} == "K=7 "*" PASS (identical to plain)" ]]
	done
}

@test "gguf-random's tiny DFlash2 drafter is laid out as llama.cpp's converter lays out one: tensors, their ne by formula, dflash keys" {
	need_py gguf
	dflash_trunk
	# llama.cpp's own conversion of t/data/dflash's drafter (a drafter of model A: hidden
	# 384, vocabulary 8192, 2 layers), and ours of the tiny trunk's
	run -0 dflash_layout "$DATA/dflash/llamacpp-header.txt"
	want=$output
	[[ $want != *"ne?"* ]]
	[ "$(grep -c '^blk\.' <<<"$want")" = 30 ]
	run -0 dflash_layout "$P/d.gguf"
	[ "$output" = "$want" ]
	# the values: the tiny shape's (target_layers the trunk's layers 0 and 2, + 1)
	run -0 gguf-inspect "$P/d.gguf"
	for kv in 'dflash.block_count +uint32 +2' 'dflash.embedding_length +uint32 +256' \
	    'dflash.attention.causal +bool +false' 'dflash.block_size +uint32 +8' \
	    'dflash.conv_kernel_size +uint32 +2' 'dflash.conv_group_size +uint32 +16' \
	    'dflash.selector_rank +uint32 +32' 'dflash.selector_top_k +uint32 +8' \
	    'dflash.target_layers +array\[int32\] +\[1, 3\]' 'dflash.attention.sliding_window +uint32 +16' \
	    'dflash.attention.sliding_window_pattern +array\[bool\] +\[true, false\]' \
	    'tokenizer.ggml.mask_token_id +uint32 +990'; do
		printf '%s\n' "${lines[@]}" | grep -Eq "^  $kv$"
	done
}

@test "gguf-random's dflash2-27b: 81 tensors, 1.92 G parameters (Qwen3.8-27B-DFlash2's), and the layout and keys of the tiny one" {
	run -0 --separate-stderr "$T/gguf-random" -n -p dflash2-27b
	n=${lines[-1]}
	# 5 layers of 15 tensors; the selector's 3, fc, its norm, the final norm
	[ "$(awk '{print $2}' <<<"$n")" = $((5 * 15 + 6)) ]
	p=$(awk '{print $4}' <<<"$n"); [ "$p" -ge 1920000000 ] && [ "$p" -lt 1930000000 ]
	b=$(awk '{print $6}' <<<"$n"); [ "$b" -ge $((2 * p)) ] && [ "$b" -lt $((2 * p + 2000000)) ]	# BF16
	[[ $output == *$'\nfc.weight\tBF16\t25600x5120\t'* ]]
	[[ $output == *$'\nselector_predecessor.weight\tBF16\t256x248320\t'* ]]
	[[ $output == *$'\nblk.4.attn_conv_proj.weight\tBF16\t5120x1280\t'* ]]
	[[ $output == *$'\nblk.4.attn_conv_base\tF32\t5120x2x2\t'* ]]
	[[ $output == *$'\nblk.4.ffn_down.weight\tBF16\t17408x5120\t'* ]]
	[[ $output == *$'\nblk.4.attn_q.weight\tBF16\t5120x4096\t'* ]]
	[[ $output == *$'\nblk.4.attn_k.weight\tBF16\t5120x1024\t'* ]]
	[[ $output != *$'\nblk.5.'* ]]
	# a file of its first layer (TQ1_0: 125 MB), its keys: the tiny drafter's and the
	# degenerate M-RoPE sections llama.cpp's converter writes for Qwen3.8's drafters
	need_py gguf
	P=$BATS_TEST_TMPDIR
	run -0 --separate-stderr "$T/gguf-random" -V -p dflash2-27b -L 1 -t TQ1_0 "$P/d27.gguf"
	run -0 dflash_layout "$P/d27.gguf"
	[[ $output != *"ne?"* ]]
	[ "$(grep -c '^blk\.0\.' <<<"$output")" = 15 ]
	have=$(sed -E 's/^([^ ]+) [^ ]+ /\1 /' <<<"$output" | grep -vx 'dflash.rope.dimension_sections')
	[ "$have" != "$(sed -E 's/^([^ ]+) [^ ]+ /\1 /' <<<"$output")" ]
	run -0 --separate-stderr "$T/gguf-random" -p tiny-dflash2 -L 1 "$P/d1.gguf"
	run -0 dflash_layout "$P/d1.gguf"
	[ "$have" = "$(sed -E 's/^([^ ]+) [^ ]+ /\1 /' <<<"$output")" ]
	run -0 gguf-inspect "$P/d27.gguf"
	for kv in 'dflash.embedding_length +uint32 +5120' 'dflash.feed_forward_length +uint32 +17408' \
	    'dflash.attention.head_count +uint32 +32' 'dflash.attention.head_count_kv +uint32 +8' \
	    'dflash.attention.key_length +uint32 +128' 'dflash.context_length +uint32 +262144' \
	    'dflash.block_size +uint32 +8' 'dflash.selector_rank +uint32 +256' \
	    'dflash.selector_top_k +uint32 +16' 'dflash.target_layers +array\[int32\] +\[6, 20, 34, 48, 62\]' \
	    'dflash.attention.sliding_window +uint32 +2048' \
	    'dflash.rope.dimension_sections +array\[int32\] +\[64, 0, 0, 0\]' \
	    'tokenizer.ggml.mask_token_id +uint32 +248070'; do
		printf '%s\n' "${lines[@]}" | grep -Eq "^  $kv$"
	done
}

@test "a drafter that does not fit its trunk is refused by name: tiny-dflash2 on model A, dflash2-27b on the tiny trunk" {
	dflash_trunk
	d=$(model_a)
	MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT=$P/d.gguf run -1 --separate-stderr run-spec --raw -t 2 -n 4 "$d" hi
	[[ $stderr == *"run-spec: "*"DFlash drafter '$P/d.gguf': drafts for a trunk of hidden size 256 and 1000 tokens (mask token 990), not this one's 384 and 8192" ]]
	run -0 --separate-stderr "$T/gguf-random" -V -p dflash2-27b -L 1 -t TQ1_0 "$P/d27.gguf"
	MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT=$P/d27.gguf run -1 --separate-stderr run-spec --raw -t 2 -n 4 "$P/trunk.gguf" hi
	[[ $stderr == *"DFlash drafter '$P/d27.gguf': drafts for a trunk of hidden size 5120 and 248320 tokens (mask token 248070), not this one's 256 and 1000" ]]
}

# llama.cpp (the vendored one of llama-cpp-python 0.3.36) loads the drafter, and builds its
# graph (a context) against the tiny trunk's context, whose embedding and head it reads
# (ctx_other: without it llama.cpp refuses, "dflash requires ctx_other to be set").  It
# drafts nothing here: a DFlash draft round is common/speculative.cpp's (the target's
# layer-input taps injected into the drafter's cache, then a block), which the peer's
# library build (LLAMA_BUILD_COMMON=OFF) and its Python bindings do not carry.
@test "gguf-random's tiny DFlash2 drafter loads in llama.cpp, its context built over the tiny trunk's" {
	need_llama_cpp
	dflash_trunk
	run -0 --separate-stderr python3 - "$P/trunk.gguf" "$P/d.gguf" <<'PY'
import sys, llama_cpp
mp = llama_cpp.llama_model_default_params()
t = llama_cpp.llama_model_load_from_file(sys.argv[1].encode(), mp)
cp = llama_cpp.llama_context_default_params()
cp.n_ctx = 64
tc = llama_cpp.llama_init_from_model(t, cp)
d = llama_cpp.llama_model_load_from_file(sys.argv[2].encode(), mp)
alone = llama_cpp.llama_init_from_model(d, cp)
cp.ctx_other = tc
dc = llama_cpp.llama_init_from_model(d, cp)
print(bool(tc), bool(d), bool(alone), bool(dc), llama_cpp.llama_model_n_embd(d),
      llama_cpp.llama_model_n_layer(d), llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(d)),
      llama_cpp.llama_model_n_params(d))
PY
	[ "$output" = "True True False True 256 2 1000 667776" ]
	[[ $stderr == *"load_arch_hparams: DFlash extract_layers = [1, 3]"* ]]
	[[ $stderr == *"load_arch_tensors: DFlash2 conv kernel = 2, group = 16, selector rank = 32, top-k = 8"* ]]
	[[ $stderr == *"dflash requires ctx_other to be set"* ]]
	run -0 --separate-stderr "$T/gguf-random" -n -p tiny-dflash2
	[[ ${lines[-1]} == "tensors 36 params 667776 "* ]]
}

# The cookbook's "RTX PRO 6000 Blackwell: DFlash2 drafter" block (../shared/seeds/000_*:
# MEMRA_COMPAT, MEMRA_MODELS, MEMRA_DSPARK_SPEC=1, MEMRA_DSPARK_DRAFT, MEMRA_FRSPEC_TRIM,
# MEMRA_CTX, MEMRA_MAX_SESSIONS, MEMRA_PREFIX_CACHE_MB; memra-server) on the tiny shapes: the
# trunk, the drafter for its hf: spec, ranks of the trunk's own continuations for its
# 32768-row ranks file (the vocabulary is 1000), MEMRA_CTX and MEMRA_PREFIX_CACHE_MB sized for
# the CPU (32 sessions of 262144 want ~20 GiB here; tools/gpu-cookbook.sh's dflash block boots
# it on the 27B shapes on a GPU).  Greedy replies equal the plain server's; with K by load
# the scheduler may not draft at all, so K pinned at 7 makes every round draft.
@test "the cookbook's DFlash2 block boots on gguf-random's tiny trunk and drafter: its proof lines, greedy replies plain's" {
	load serve
	dflash_trunk
	SPID=
	for p in "5,17,250,3,99" "7,7,7,1,2,3,4,5,6,7,8,9,10" "42" "300,301,302,303,304,305,306,307,308,309,310,311,312,313,314,315,316,317,318,319,320"; do
		printf '{"model":"q38","prompt":[%s],"max_tokens":24,"temperature":0,"ignore_eos":true,"return_token_ids":true}\n' "$p"
	done >"$P/q.jsonl"
	# replies: each request's ids, the four at once
	replies() {
		local i=0 l pids=
		while IFS= read -r l; do
			curl -s -m 60 "$URL/v1/completions" -H 'Content-Type: application/json' -d "$l" >"$P/a$i" &
			pids="$pids $!" i=$((i + 1))
		done <"$P/q.jsonl"
		wait $pids	# (not the server's)
		for i in 0 1 2 3; do jq -c '.choices[0].token_ids' "$P/a$i"; done
	}
	# ranks: the trunk's greedy continuations of the prompts
	start_serve MEMRA_MODELS="q38=$P/trunk.gguf" MEMRA_SPEC_K=0
	replies >"$P/plain"
	stop_serve
	[ "$(grep -c '^\[[0-9]' "$P/plain")" = 4 ]
	jq -r '.[]' "$P/plain" | sort -un >"$P/ranks.txt"
	n=$(wc -l <"$P/ranks.txt")
	[ "$n" -ge 8 ]
	start_serve memra-server MEMRA_COMPAT=openai MEMRA_MODELS="q38=$P/trunk.gguf" MEMRA_DSPARK_SPEC=1 \
	    MEMRA_DSPARK_DRAFT="$P/d.gguf" MEMRA_FRSPEC_TRIM="$P/ranks.txt" MEMRA_CTX=8192 \
	    MEMRA_MAX_SESSIONS=32 MEMRA_PREFIX_CACHE_MB=64
	grep -qx "\[dspark\] arming DFlash2 disables MTP spec (the trunk's MTP head stays unused)" "$LOG"
	grep -qx "\[dspark\] q38: DFlash2 drafter $P/d.gguf: 2 layers, block 8, taps \[0,2\], window 16, weights Q4_0" "$LOG"
	grep -qx "\[dspark\] q38: DFlash2 draft head TRIMMED to $n rows" "$LOG"
	grep -qx '\[dspark\] q38: precision q4 (MEMRA_DFLASH_PREC)' "$LOG"
	grep -qx '\[model\] q38: ctx=8192 K=7 (DFlash2 speculative decode for greedy requests), no chat template' "$LOG"
	grep -q '^\[sched\] q38: speculative K by load, up to 7 ' "$LOG"
	replies >"$P/spec"
	diff "$P/plain" "$P/spec"
	stop_serve
	start_serve memra-server MEMRA_COMPAT=openai MEMRA_MODELS="q38=$P/trunk.gguf" MEMRA_DSPARK_SPEC=1 \
	    MEMRA_DSPARK_DRAFT="$P/d.gguf" MEMRA_FRSPEC_TRIM="$P/ranks.txt" MEMRA_CTX=8192 \
	    MEMRA_MAX_SESSIONS=32 MEMRA_PREFIX_CACHE_MB=64 MEMRA_SPEC_K=7
	replies >"$P/spec7"
	diff "$P/plain" "$P/spec7"
	r=$(curl -s "$URL/metrics" | awk '$1 == "memra_spec_rounds_total" || index($1, "memra_spec_rounds_total{") == 1 { s += $2 } END { print s + 0 }')
	stop_serve
	[ "$r" -gt 0 ]
}

@test "model-bench on model A: its MTP draft chain of 1..K steps, chained and step by step, against a decode step, full and masked head" {
	d=$(model_a)
	run -0 --separate-stderr "$T/model-bench" -d cpu -t 2 -c 20 -n 2 -r 1 -k 3 "$d"
	[[ ${lines[7]} == "verify	K	3	rows	4	ms	"* ]]
	x=$'\tx_step\t[0-9.]+'
	for k in 1 2 3; do
		[[ ${lines[$((7 + k))]} =~ ^mtp-chain$'\t'steps$'\t'$k$'\t'chained_ms$'\t'[0-9.]+$x$'\t'steps_ms$'\t'[0-9.]+$x$'\t'steps_over_chained$'\t'[0-9.]+$ ]]
	done
	[ "${#lines[@]}" -eq 11 ]
	# each x_step is its ms over the decode step's, the last field steps_ms over chained_ms
	step=$(awk -F'\t' '$1 == "decode-median" { print 1000 / $9 }' <<<"$output")
	awk -F'\t' -v s="$step" '$1 == "mtp-chain" { c = $5; st = $9
	    if ((c / s - $7) ^ 2 > 1e-4 + (0.002 * $7) ^ 2 || (st / s - $11) ^ 2 > 1e-4 + (0.002 * $11) ^ 2 ||
	    (st / c - $NF) ^ 2 > 1e-4 + (0.002 * $NF) ^ 2) bad++ } END { exit bad > 0 }' <<<"$output"
	# MEMRA_FRSPEC_TRIM: the chain of a masked head, its attach line on stderr
	seq 0 3 4000 >"$BATS_TEST_TMPDIR/r.txt"
	MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/r.txt run -0 --separate-stderr "$T/model-bench" -d cpu -t 2 \
	    -c 20 -n 2 -r 1 -k 2 "$d"
	[ "$stderr" = "[frspec-trim] self-trimmed head: 1334 rows of main output.weight (BF16)" ]
	[[ ${lines[8]} == "mtp-chain	steps	2	chained_ms	"* ]]
}

@test "model-bench -D: a DFlash2 drafter's forward, its block verify and a block of its context, against a decode step" {
	d=$(model_a)
	run -0 --separate-stderr "$T/model-bench" -d cpu -t 2 -G device -c 20 -n 2 -r 1 -k 7 -D "$DATA/dflash/d2" "$d"
	[[ ${lines[11]} == "verify	K	7	rows	8	ms	"*"	x_step	"*"	min	"*"	max	"* ]]
	tail=$'\tms\t[0-9.]+\tmin\t[0-9.]+\tmax\t[0-9.]+\tx_step\t[0-9.]+$'
	[[ ${lines[12]} =~ ^dflash-draft$'\t'block$'\t'8$'\t'ctx$'\t'20$tail ]]
	[[ ${lines[13]} =~ ^dflash-verify$'\t'K$'\t'7$'\t'rows$'\t'8$tail ]]
	[[ ${lines[14]} =~ ^dflash-context$'\t'rows$'\t'8$tail ]]
	[ "${#lines[@]}" -eq 15 ]
	# min <= median <= max, and x_step is the median over the decode step's ms
	step=$(awk -F'\t' '$1 == "decode-median" { print 1000 / $9 }' <<<"$output")
	awk -F'\t' -v s="$step" '$1 ~ /^dflash-/ { for (i = 1; i < NF; i++) if ($i == "ms") m = $(i + 1)
	    else if ($i == "min") lo = $(i + 1); else if ($i == "max") hi = $(i + 1)
	    if (!(lo <= m && m <= hi && (m / s - $NF) ^ 2 < 1e-4 + (0.002 * $NF) ^ 2)) bad++ }
	    END { exit bad > 0 }' <<<"$output"
	run -1 --separate-stderr "$T/model-bench" -d cpu -c 20 -D "$BATS_TEST_TMPDIR/none" "$d"
	[[ $stderr == "model-bench: "*"$BATS_TEST_TMPDIR/none"* ]]
}

@test "gpu-dflash-bench.sh on the CPU: the costs, MTP K=2 with A's trace, synthetic traces replayed with the drafter, a summary and a verdict" {
	d=$(model_a)
	o=$BATS_TEST_TMPDIR/out
	A=$d PROMPTS=2 N=24 PLEN=8,12 LS="2 3" MTP_K=2 CTX=16 STEPS=2 BENCH_ARGS='-t 2' \
	    RUN_SPEC_ARGS='-t 2' RECORD_ARGS='-t 2' MODEL_NAME=fixture-A \
	    run -0 --separate-stderr gpu-dflash-bench.sh "$d" "$DATA/dflash/d2" "$o"
	# costs.tsv: DESIGN.md's columns, a decode step's tok/s, the verifies and the drafter's parts in ms against it
	[ "$(head -1 "$o/costs.tsv")" = "$(head -1 "$o/replay.tsv")" ]
	[ "$(cut -f7 "$o/costs.tsv" | tr '\n' ' ')" = "scenario decode-b1 $(printf 'verify-k%d ' $(seq 15))dflash-draft-b8 dflash-verify-k7 dflash-context-b8 " ]
	[ "$(awk -F'\t' 'NR > 1 { print $4, $5, $13, $14, $17 }' "$o/costs.tsv" | sort -u | tr '\n' ,)" = "model-bench fixture-A ms decode-step costs.log,model-bench fixture-A tok/s - costs.log," ]
	# replay.tsv: MTP K=2 and the DFlash L's, each plain decode (the peer) against the replay
	[ "$(cut -f4,7,9,13,14 "$o/replay.tsv")" = "$(printf 'binary\tscenario\tn\tunit\tpeer\nrun-spec\tspec-replay-k2\t2\ttok/s\tplain-decode\nrun-spec\tdflash-replay-b8-l2\t2\ttok/s\tplain-decode\nrun-spec\tdflash-replay-b8-l3\t2\ttok/s\tplain-decode')" ]
	for l in 2 3; do
		[ "$(grep -c '^### block 0 arm [AB] rc=0' "$o/replay-dflash-l$l.log")" -eq 4 ]
		grep -q -- "--trace-arm plain --dspark-spec 0 '$d'" "$o/replay-dflash-l$l.log"
		grep -q "^\[trace\] K=7: 2 prompts recorded with the dflash2 drafter on synthetic: spec-trace-synth -K 7 -L $l -s 1 .*, replayed with the dflash2 drafter" "$o/replay-dflash-l$l.log"
	done
	# the summary: a line an arm, the replays' figures from their rows; the verdict from them and the costs
	[ "$(cut -f1 "$o/summary.tsv" | tr '\n' ' ')" = "drafter mtp-k2 dflash-l2 dflash-l3 " ]
	row=$(awk -F'\t' '$1 == "replay" { print; exit }' "$o/replay-dflash-l3.log")
	[ "$(awk -F'\t' '$1 == "dflash-l3" { print $5, $6, $7, $8, $9 }' "$o/summary.tsv")" = "$(field "$row" 10) $(field "$row" 9) $(field "$row" 8) $(field "$row" 7) $(field "$row" 11)" ]
	v=$(grep -A4 '^costs: ' <<<"$output")
	[[ $v == "costs: a DFlash round (block 8) = drafter forward "*" decode steps"$'\n'"dflash L=2: "*"x plain decode (mean_len "*$'\n'"dflash L=3: "*$'\n'"mtp-k2: "*"x plain decode; from the costs DFlash breaks even at mean_len "*$'\n'"DFlash wins at "* ]]
	[ "$v" = "$(cat "$o/verdict.txt")" ]
	[ "$(tail -1 <<<"$output")" = "($o)" ]
	run -2 --separate-stderr gpu-dflash-bench.sh "$d"
	[ "$stderr" = "gpu-dflash-bench.sh: usage: gpu-dflash-bench.sh TRUNK DRAFTER [OUTDIR]" ]
	run -1 --separate-stderr gpu-dflash-bench.sh "$d" "$BATS_TEST_TMPDIR/none"
	[ "$stderr" = "gpu-dflash-bench.sh: $BATS_TEST_TMPDIR/none: no such file or directory" ]
}

@test "gpu-dflash-bench.sh's verdict: where the replayed ratios beat MTP's, and the break-even from the costs and from the replays" {
	d=$(model_a)
	o=$BATS_TEST_TMPDIR/out
	mkdir -p "$o"
	printf 'dflash-draft\tblock\t16\tctx\t128\tms\t5\tmin\t4\tmax\t6\tx_step\t0.500\n' >"$o/costs.log"
	printf 'dflash-verify\tK\t15\trows\t16\tms\t15\tmin\t14\tmax\t16\tx_step\t1.500\n' >>"$o/costs.log"
	printf 'mtp-k3\t100\t180\t1.8000\t2.700\t1\t1\t1\t1/1\n' >"$o/summary-mtp.tsv"
	printf 'dflash-l%s\t100\t%s\t%s\t%s\t1\t1\t1\t1/1\n' 3 140 1.4 2.9 4 190 1.9 3.9 5 240 2.4 4.8 >"$o/summary-dflash.tsv"
	run -0 --separate-stderr env PARTS=none gpu-dflash-bench.sh "$d" "$DATA/dflash/d2" "$o"
	[ "$(cat "$o/verdict.txt")" = "costs: a DFlash round (block 16) = drafter forward 0.500 + verify 1.500 = 2.000 decode steps
dflash L=3: 1.400x plain decode (mean_len 2.9; the costs predict 1.450x)
dflash L=4: 1.900x plain decode (mean_len 3.9; the costs predict 1.950x)
dflash L=5: 2.400x plain decode (mean_len 4.8; the costs predict 2.400x)
mtp-k3: 1.800x plain decode; from the costs DFlash breaks even at mean_len 3.60
DFlash wins at L=4, L=5 (the measured ratios cross mtp-k3's at mean_len 3.70)" ]
	[ "$(wc -l <"$o/summary.tsv")" -eq 5 ]
	# no MTP arm: nothing to compare with; no costs: a usage of PARTS
	rm "$o/summary-mtp.tsv"
	run -0 --separate-stderr env PARTS=none gpu-dflash-bench.sh "$d" "$DATA/dflash/d2" "$o"
	[ "$(tail -2 <<<"$output")" = "no MTP arm: nothing to compare with
($o)" ]
	rm "$o/costs.log"
	run -1 --separate-stderr env PARTS=dflash gpu-dflash-bench.sh "$d" "$DATA/dflash/d2" "$o"
	[ "$stderr" = "gpu-dflash-bench.sh: no drafter block in $o/costs.log: run PARTS=costs first" ]
}

@test "gpu-vision-bench.sh on the CPU at tiny shapes: its own random trunk and tower (made once), A B B A rows of image-prompt TTFT against text of the same token count" {
	[ -x "$T/image-prep" ] || skip "build/t/tools not built (make units)"
	P=$BATS_TEST_TMPDIR
	# transformers' Gemma-4 resize rule (patch 16, pooling 3): a W x H image's soft tokens
	tok() { python3 -c 'import math,sys
w,h,b=map(int,sys.argv[1:]); f=math.sqrt(b*9*256/(h*w))
print(math.floor(f*h/48)*math.floor(f*w/48))' "$@"; }
	bench() { TMPDIR=$P GPU_VISION_SHAPE=tiny-gemma4 GPU_VISION_DEVICE=cpu GPU_VISION_THREADS=2 \
	    GPU_VISION_IMAGES=${GPU_VISION_IMAGES:-96x64:1 48x48:2} GPU_VISION_TOKENS=70 sh "$TOP/tools/gpu-vision-bench.sh" "$@"; }
	run -0 bench - - "$P/o"
	a=$(tok 96 64 70) b=$(tok 48 48 70)
	[[ $output == *"== ttft-img-96x64x1: 1 image(s) of 96x64, $a soft tokens, prompt $((16 + 1 + a + 2)) tokens"* ]]
	[[ $output == *"== ttft-img-48x48x2: 2 image(s) of 48x48, $((2 * b)) soft tokens, prompt $((16 + 2 + 2 * b + 4)) tokens"* ]]
	# one row a scenario: run-gen, the two files' types, the prompt's tokens, 2 runs an arm
	cut -f 4,6,7,8,9,13,14 "$P/o/vision-abba.tsv" >"$P/cols"
	printf 'binary\tquant\tscenario\tctx\tn\tunit\tpeer\nrun-gen\tQ8_0+BF16\tttft-img-96x64x1\t%d\t2\ts\ttext-ids-same-count\nrun-gen\tQ8_0+BF16\tttft-img-48x48x2\t%d\t2\ts\ttext-ids-same-count\n' \
	    $((19 + a)) $((22 + 2 * b)) | diff - "$P/cols"
	# the summary: the tower's time a part of B's TTFT
	[ "$(grep -c $'^ttft-img-.*\tB ttft .* vision [0-9.]* s\tB/A ' "$P/o/vision-summary.txt")" = 2 ]
	ls "$P/memra-gguf/gemma4-tiny-gemma4-random-Q8_0.gguf" "$P/memra-gguf/gemma4-tiny-mmproj-random-BF16.gguf"
	# kept: a second run makes neither again; given files, their types in the rows
	touch -d '2000-01-01' "$P"/memra-gguf/*.gguf
	GPU_VISION_IMAGES=48x48:1 run -0 bench
	[ -z "$(find "$P/memra-gguf" -name '*.gguf' -newermt '2001-01-01')" ]
	"$T/gguf-random" -p tiny-mmproj -t F16 "$P/f16.gguf"
	GPU_VISION_IMAGES=48x48:1 run -0 bench "$P/memra-gguf/gemma4-tiny-gemma4-random-Q8_0.gguf" \
	    "$P/f16.gguf" "$P/o2"
	[ "$(cut -f 5,6,7 "$P/o2/vision-abba.tsv" | tail -n 1)" = $'gemma4-tiny-gemma4-random-Q8_0.gguf + f16.gguf\tQ8_0+F16\tttft-img-48x48x1' ]
	# a trunk without Gemma-4's image markers, misuse
	"$T/gguf-random" -p tiny -t Q8_0 "$P/q.gguf"
	run -1 --separate-stderr bench "$P/q.gguf" "$P/memra-gguf/gemma4-tiny-mmproj-random-BF16.gguf" "$P/o3"
	[ "$stderr" = "gpu-vision-bench.sh: $P/q.gguf: no <|image|> token in its vocabulary" ]
	run -2 --separate-stderr bench "$P/q.gguf"
	[ "$stderr" = "usage: sh tools/gpu-vision-bench.sh [TRUNK MMPROJ [OUTDIR]]" ]
}

@test "model-bench -V: a vision tower's encoding of one random image timed (gguf-random's tiny tower on the CPU); an image off the patch grid is misuse" {
	P=$BATS_TEST_TMPDIR
	run -0 --separate-stderr "$T/gguf-random" -p tiny-mmproj "$P/t.gguf"
	run -0 --separate-stderr "$T/model-bench" -V 96x144 -d cpu -t 2 -r 2 "$P/t.gguf"
	[ "${lines[0]}" = "vision	$P/t.gguf	device	$(cut -f4 <<<"${lines[0]}")	layers	2	embd	64	patch	16	pool	3" ]
	# 96 x 144 pixels: 6 x 9 patches of 16, 2 x 3 soft tokens of 3 x 3
	[[ ${lines[1]} == "vision-encode	96x144	patches	54	soft_tokens	6	reps	2	ms	"[0-9]* ]]
	run -2 --separate-stderr "$T/model-bench" -V 100x96 -d cpu "$P/t.gguf"
	[ "$stderr" = "model-bench: -V 100x96: not multiples of 48 (patch 16 x pooling 3)" ]
	run -2 --separate-stderr "$T/model-bench" -V 96 -d cpu "$P/t.gguf"
	[ "$stderr" = "model-bench: bad -V: WxH pixels, 1..8192 each" ]
	# a model that is no tower
	run -1 --separate-stderr "$T/model-bench" -V 96x96 -d cpu "$(model_a)"
	[ -n "$stderr" ]
}

@test "model-bench's decode bytes count an expert stack's n_used of n_exp experts (tiny-moe: 2 of 8), as gguf's reader sums the file" {
	P=$BATS_TEST_TMPDIR
	run -0 --separate-stderr "$T/gguf-random" -p tiny-moe -t Q8_0 "$P/m.gguf"
	run -0 --separate-stderr "$T/model-bench" -d cpu -c 16 -n 2 -r 1 -k 0 "$P/m.gguf"
	row=$(grep '^decode-median' <<<"$output")
	want=$(python3 - "$P/m.gguf" <<'PY'
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
f = lambda k: int(r.fields["qwen35moe." + k].parts[-1][0])
mtp = "blk.%d." % (f("block_count") - f("nextn_predict_layers"))	# the MTP block: not run
dense = sum(int(t.n_bytes) for t in r.tensors
            if t.name != "token_embd.weight" and not t.name.startswith(mtp) and "_exps." not in t.name)
exps = sum(int(t.n_bytes) for t in r.tensors if "_exps." in t.name and not t.name.startswith(mtp))
print(dense + exps * f("expert_used_count") // f("expert_count"))
PY
)
	[ "$(field "$row" 11)" = "$want" ]
}

@test "gpu-arch-bench.sh GPU_ARCH_AB=VAR=X:Y: model-bench under X against Y, A B B A, a row a scenario named SCENARIO-VAR-X-vs-Y (no llama-bench: '-'); a malformed GPU_ARCH_AB and nothing to run are misuse" {
	P=$BATS_TEST_TMPDIR
	run -0 --separate-stderr env TMPDIR="$P" OUT="$P/o" GPU_ARCH_DEVICE=cpu \
	    GPU_ARCH_AB=MEMRA_CUDA_QKT=0:1 sh "$TOP/tools/gpu-arch-bench.sh" - tiny-moe:Q8_0
	[ "$(grep -c '^block 0 [AB] ' <<<"$output")" -eq 8 ]
	run -0 cut -f5,6,7,14 "$P/o/arch-abba.tsv"
	[ "${lines[1]}" = "random-tiny-moe	Q8_0	decode-b1-MEMRA_CUDA_QKT-0-vs-1	model-bench-MEMRA_CUDA_QKT=0" ]
	[ "${lines[2]}" = "random-tiny-moe	Q8_0	prefill-512-MEMRA_CUDA_QKT-0-vs-1	model-bench-MEMRA_CUDA_QKT=0" ]
	[ "${#lines[@]}" -eq 3 ]
	[ ! -e "$P/memra-gguf/arch-tiny-moe-Q8_0.gguf" ]	# each file removed after its runs
	run -2 --separate-stderr env GPU_ARCH_AB=bad sh "$TOP/tools/gpu-arch-bench.sh" - tiny-moe:Q8_0
	[ "$stderr" = "gpu-arch-bench.sh: GPU_ARCH_AB=bad: not VAR=X:Y" ]
	run -2 --separate-stderr sh "$TOP/tools/gpu-arch-bench.sh" - tiny-moe:Q8_0
	[ "$stderr" = "gpu-arch-bench.sh: no llama-bench, no GPU_ARCH_AB, no GPU_ARCH_PROF: nothing to run" ]
}

@test "gpu-kernel-ncu.sh: too few arguments, a bad tag or count and a missing ncu are said in one line; without ncu nothing runs" {
	P=$BATS_TEST_TMPDIR
	run -2 --separate-stderr sh "$TOP/tools/gpu-kernel-ncu.sh" q6k k_mvk 3
	[ "$stderr" = "usage: sh tools/gpu-kernel-ncu.sh TAG REGEX COUNT CMD..." ]
	run -2 --separate-stderr sh "$TOP/tools/gpu-kernel-ncu.sh" q6k k_mvk 0 true
	[ "$stderr" = "gpu-kernel-ncu.sh: COUNT '0': not a count" ]
	run -2 --separate-stderr sh "$TOP/tools/gpu-kernel-ncu.sh" 'a/b' k_mvk 3 true
	[ "$stderr" = "gpu-kernel-ncu.sh: TAG 'a/b': letters, digits, . _ - only" ]
	# (a PATH without ncu: this machine's tools, none of CUDA's)
	mkdir "$P/o"
	run -1 --separate-stderr env PATH=/usr/bin:/bin OUT="$P/o" sh "$TOP/tools/gpu-kernel-ncu.sh" \
	    q6k k_mvk 3 true
	[ "$stderr" = "gpu-kernel-ncu.sh: ncu: not found" ]
	[ -z "$(ls "$P/o")" ]
}
