bats_require_minimum_version 1.5.0
# NVFP4 safetensors checkpoints of model A (compressed-tensors and ModelOpt layouts), made by
# tools/make-nvfp4-fixtures.py (about 210 MB with the malformed variants, so made here, not kept
# in t/data; t/data/nvfp4/a-ref.tsv holds the reference dequantization it printed and
# a-files.sha256 the files its --ct-library run wrote through the compressed-tensors library).
# The maker needs numpy, ml_dtypes and safetensors (the CI peers), no torch: about 2 s here
# (2 shared cores), the frspec-owngen ranks for the trim test 0.2 s, the whole file 11 s.
setup() { load helper; }
teardown() { [ -z "${SPID:-}" ] || kill "$SPID" 2>/dev/null || true; }

ML=build/t/tools/model-logits

setup_file() {
	load helper
	a=$(model_a) || return 0
	python3 -c 'import numpy, ml_dtypes, safetensors' 2>/dev/null || return 0
	export FX="$BATS_FILE_TMPDIR/fx"
	python3 "$TOP/tools/make-nvfp4-fixtures.py" "$a" "$FX"
	head -1 "$a/prompts.jsonl" >"$BATS_FILE_TMPDIR/p.jsonl"
	frspec-owngen -t 2 --raw --ngen 32 "$a" "$BATS_FILE_TMPDIR/r.gguf" 256 \
	    "$BATS_FILE_TMPDIR/p.jsonl" 2>/dev/null
	export RANKS="$BATS_FILE_TMPDIR/r.gguf.txt"
}

# fx: the fixtures exist; a missing peer skips (fails under MEMRA_REQUIRE_PEERS=1)
fx() {
	model_a >/dev/null
	need_py numpy ml_dtypes safetensors
	[ -d "$FX/ct" ]
	[ -d "$FX/mo" ]
}

@test "the torch-free maker writes the bytes of its --ct-library run and the committed reference" {
	fx
	diff "$TOP/t/data/nvfp4/a-ref.tsv" "$FX/ref.tsv"
	(cd "$FX" && sha256sum --quiet -c "$TOP/t/data/nvfp4/a-files.sha256")
}

# The plan's float rows of an NVFP4 tensor are its GGUF blocks dequantized times s2: for the
# tensors whose rows the conversion does not reorder, the same bits as the Python reference.
@test "both layouts dequantize bit for bit as the reference says" {
	fx
	for l in ct mo; do
		mkdir "$BATS_TEST_TMPDIR/$l"
		"$TOP/build/t/tools/st-dump" "$FX/$l" "$BATS_TEST_TMPDIR/$l" >/dev/null
		run -0 python3 - "$TOP/t/data/nvfp4/a-ref.tsv" "$BATS_TEST_TMPDIR/$l" "$l" <<-'EOF'
		import hashlib, re, sys
		names = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
		         "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
		n = 0
		for line in open(sys.argv[1]):
		    f = line.split("\t")
		    m = re.match(r"(model|mtp)\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)$", f[1])
		    if f[0] != sys.argv[3] or not m:
		        continue
		    blk = int(m.group(2)) + (8 if m.group(1) == "mtp" else 0)
		    got = open("%s/blk.%d.%s.weight.f32" % (sys.argv[2], blk, names[m.group(4)]), "rb").read()
		    assert hashlib.sha256(got).hexdigest() == f[4], f[1]
		    n += 1
		assert n >= 20, n
		print(n)
		EOF
	done
}

# HF checkpoints take transformers' GDN L2 norm, GGUFs llama.cpp's (t/model.bats); with the
# same norm on both the logits were measured bit-identical, so the held bound is that gap.
@test "quant-nvfp4 copies the blocks (no requantization); its GGUF gives the checkpoint's logits" {
	fx
	need_py numpy
	ids="970 11 1879 374 264 1273 13 576 3974 1387 3883 3420 916 279 1567 556"
	for l in ct mo; do
		set -- --tensor-type '(norm\.weight|ssm_a|ssm_dt\.bias|ssm_conv1d\.weight)$=f32' --keep '.*'
		run -0 quant-nvfp4 -n "$@" "$FX/$l" -
		[[ $output =~ blk\.0\.ffn_gate\.weight\ +384x1024\ +NVFP4\ +NVFP4\ +[0-9]+\ +copy\ NVFP4\ source ]]
		quant-nvfp4 "$@" "$FX/$l" "$BATS_TEST_TMPDIR/$l.gguf"
		"$TOP/$ML" -t 2 "$FX/$l" "$BATS_TEST_TMPDIR/hf" $ids
		"$TOP/$ML" -t 2 "$BATS_TEST_TMPDIR/$l.gguf" "$BATS_TEST_TMPDIR/gg" $ids
		run -0 python3 -c 'import numpy as np,sys; a,b=(np.fromfile(f,dtype=np.float32).reshape(16,-1) for f in sys.argv[1:]); r=np.abs(a-b).max()/np.abs(a).max(); print(r); assert r <= 3e-2 and (a.argmax(1) == b.argmax(1)).all()' "$BATS_TEST_TMPDIR/hf" "$BATS_TEST_TMPDIR/gg"
	done
}

@test "the GGUF's NVFP4 tensors and .scale sidecars are the blocks llama.cpp's converter writes" {
	fx
	need_py numpy gguf
	quant-nvfp4 --keep '.*' "$FX/mo" "$BATS_TEST_TMPDIR/mo.gguf" 2>/dev/null
	run -0 python3 - "$BATS_TEST_TMPDIR/mo.gguf" <<-'EOF'
	import sys, gguf
	r = gguf.GGUFReader(sys.argv[1])
	t = {x.name: x for x in r.tensors}
	q = [n for n in t if t[n].tensor_type == gguf.GGMLQuantizationType.NVFP4]
	assert "output.weight" in q and "blk.8.attn_q.weight" in q, q
	assert all(n[:-len("weight")] + "scale" in t for n in q)
	print(len(q))
	EOF
}

@test "run-spec: the compressed-tensors checkpoint's model_mtp.safetensors head drafts, identical to plain" {
	fx
	run -0 --separate-stderr run-spec --raw -K 1-3 -n 24 -t 2 "$FX/ct" "def fibonacci(n):"
	for k in 1 2 3; do
		[[ ${lines[$k]} == "K=$k "*" acceptance "*"PASS (identical to plain)" ]]
	done
	[ "${lines[4]}" = "SELF-CONSISTENCY PASS" ]
}

@test "kernel-check -n: the NVFP4 products (int8 activations) hold the logits' bound at 0.1, over the CPU's own float noise" {
	fx
	run -0 --separate-stderr kernel-check -n "$FX/ct"
	# mostly bf16 weights: the CPU's prefill and steps agree to float order ...
	[[ ${lines[0]} =~ ^cpu\ noise\ ([^ ]*)\ \(order ]]
	awk -v r="${BASH_REMATCH[1]}" 'BEGIN { exit !(r < 1e-4) }'
	# ... yet a rounding flipped in an NVFP4 product moves them further on another order (the GPU's)
	[[ ${lines[2]} == "tolerance 0.1 relative (model prefill logits), near-tie 0.001 (model greedy)" ]]
	a=$(model_a)
	run -0 --separate-stderr kernel-check -n "$a"	# A itself: float products only
	[[ ${lines[2]} == "tolerance 0.01 relative (model prefill logits), near-tie 0.001 (model greedy)" ]]
}

@test "MEMRA_FRSPEC_TRIM gathers the ModelOpt head's NVFP4 rows; MEMRA_FULL_PREC=1 turns it off" {
	fx
	MEMRA_FRSPEC_TRIM=$RANKS run -0 --separate-stderr run-spec --raw -K 1-3 -n 24 -t 2 \
	    "$FX/mo" "def fibonacci(n):"
	[[ $stderr == *"[frspec-trim] self-trimmed head: 256 rows of main output.weight (NVFP4)"* ]]
	for k in 1 2 3; do
		[[ ${lines[$k]} == "K=$k "*"PASS (identical to plain)" ]]
	done
	MEMRA_FULL_PREC=1 MEMRA_FRSPEC_TRIM=$RANKS run -0 --separate-stderr run-spec -K 2 -n 8 \
	    "$FX/mo" hi
	[[ $stderr != *"frspec-trim"* ]]
}

@test "malformed checkpoints fail with one line naming the tensor" {
	fx
	for b in noscale:"NVFP4 without its block scale 'model.layers.0.mlp.gate_proj.weight_scale'" \
	    noglobal:"NVFP4 without its per-tensor scale 'model.layers.0.mlp.gate_proj.weight_global_scale'" \
	    noscale2:"NVFP4 without its per-tensor scale 'model.layers.0.mlp.gate_proj.weight_scale_2'" \
	    scaleshape:"is F8_E4M3 [1024, 23], want F8_E4M3 [1024, 24]" \
	    scaledtype:"is F16 [1024, 24], want F8_E4M3 [1024, 24]" \
	    noconfig:"NVFP4, but neither config.json nor hf_quant_config.json declares NVFP4" \
	    row:"GGUF shape {336, 1024, 1, 1}, config.json implies {384, 1024}"; do
		run -1 --separate-stderr run-gen -n 1 "$FX/bad-${b%%:*}" hi
		[ "${#stderr_lines[@]}" = 1 ]
		[[ $stderr == "run-gen: $FX/bad-${b%%:*}: tensor '"*"${b#*:}" ]]
		run -1 --separate-stderr quant-nvfp4 "$FX/bad-${b%%:*}" "$BATS_TEST_TMPDIR/x.gguf"
		[[ $stderr == *"${b#*:}" ]]
	done
}

@test "the cookbook's 'No GGUF anywhere' block boots as written on the compressed-tensors checkpoint: the ranks file self-trims its (bf16) head, its own MTP head drafts, replies are plain decode's" {
	fx
	need_py openai
	load serve
	P=$BATS_TEST_TMPDIR
	SC="python3 $TOP/t/serve-client.py"
	ln -s "$FX/ct" "$P/Qwen3.8-27B-NVFP4"
	# the block as the cookbook writes it (its speculation then follows the load policy)
	start_serve memra-server MEMRA_FRSPEC_TRIM="$RANKS" MEMRA_MODELS="q38=$P/Qwen3.8-27B-NVFP4"
	stop_serve
	grep -q '^\[frspec-trim\] self-trimmed head: 256 rows of main output.weight (BF16)$' "$LOG"
	grep -q '^\[model\] q38: ctx=[0-9]* K=3 (MTP speculative decode for greedy requests)' "$LOG"
	grep -q '^\[sched\] q38: speculative K by load, up to 3 ' "$LOG"
	# K pinned at 3: the MTP head's drafts verified and accepted, the reply plain decode's
	start_serve MEMRA_SPEC_K=3 MEMRA_FRSPEC_TRIM="$RANKS" MEMRA_MODELS="q38=$P/Qwen3.8-27B-NVFP4"
	run -0 $SC "$URL" complete q38 "def fibonacci(n):" 24
	spec=$output
	run -0 curl -s "$URL/metrics"
	stop_serve
	[[ $output == *'memra_spec_drafted_tokens_total{k="3"} '[1-9]* ]]
	[[ $output == *'memra_spec_accepted_tokens_total{k="3"} '[1-9]* ]]
	start_serve MEMRA_SPEC_K=0 MEMRA_MODELS="q38=$P/Qwen3.8-27B-NVFP4"
	run -0 $SC "$URL" complete q38 "def fibonacci(n):" 24
	stop_serve
	[ "$output" = "$spec" ]
	[ "$(jq -r .finish <<<"$output")" = length ]
}
