bats_require_minimum_version 1.5.0
# qwen35moe (the Qwen3.5 hybrid with every FFN a mixture of experts) on the
# CPU backend against transformers 5.17: the tiny random models of
# t/data/moe (tools/make-moe-models.py), their reference logits and greedy
# ids in refs.json, and llama.cpp's converter's GGUF of one of them.
setup() {
	load helper
	load arch
	arch_setup moe moe-e8k2-mtp moe-e4k1-tied moe-e6k2-r4
	N=$M/moe-e4k2-nvfp4
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
		! grep -q 'FAIL (' <<<"$output" || false
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
	[[ $stderr == *"[mtp-draft] external draft head: blk.4, source=output.weight, head_vocab=64 (trimmed, d2t map)"* ]]
	run -0 --separate-stderr $spec --draft "$T/d.gguf" "$T/trunk.gguf" "hello world"
	[[ $stderr == *"[mtp-draft] external draft head: blk.4"* ]]
	MEMRA_MTP_DRAFT=$T/d.gguf run -0 --separate-stderr $spec "$T/trunk.gguf" "hello world"
	[[ $stderr == *"[mtp-draft] external draft head: blk.4"* ]]
	MEMRA_FRSPEC_TRIM=$T/r.gguf.txt run -0 --separate-stderr $spec "$T/trunk.gguf" "hello world"
	[ "${lines[-1]}" = "SELF-CONSISTENCY PASS" ]
	[[ $stderr == *"[frspec-trim] self-trimmed head: 64 rows of main output.weight (F32)"* ]]
}

# moe-e4k2-nvfp4: the routed experts in compressed-tensors NVFP4, a global scale each (spread
# up to 4x by tools/make-moe-models.py); llamacpp-nvfp4.gguf is llama.cpp's converter's GGUF
# of it: the stacks in NVFP4 beside an F32 [4] .scale each, one value an expert.  NVFP4
# products take Q8_0 activations (as ggml's CPU backend), which on these random models moves
# the logits far from transformers' (Q8_0 weights on moe-e8k2-mtp: 1.4 relative, routes
# flip), so the checks of this model are bit for bit.
@test "NVFP4 experts with a global scale each: the plan's rows are each expert's e2m1 * e4m3 / global, bit for bit" {
	need_py numpy ml_dtypes
	mkdir "$BATS_TEST_TMPDIR/d"
	"$TOP/build/t/tools/st-dump" "$N" "$BATS_TEST_TMPDIR/d" >/dev/null
	run -0 python3 - "$N/model.safetensors" "$BATS_TEST_TMPDIR/d" <<-'EOF'
	import json, struct, sys
	import ml_dtypes, numpy as np
	buf = open(sys.argv[1], "rb").read()
	n = struct.unpack("<Q", buf[:8])[0]
	hdr = json.loads(buf[8:8 + n])
	def get(k, dt):
	    a, b = hdr[k]["data_offsets"]
	    return np.frombuffer(buf[8 + n + a:8 + n + b], dt).reshape(hdr[k]["shape"])
	E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, 0, -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
	done, globals_ = 0, set()
	for blk in range(5):	# blk.4: the MTP block's experts
	    for proj in ("gate", "up", "down"):
	        want = []
	        for e in range(4):
	            p = ("mtp.layers.0" if blk == 4 else "model.layers.%d" % blk) + \
	                ".mlp.experts.%d.%s_proj." % (e, proj)
	            c = get(p + "weight_packed", np.uint8)
	            s = get(p + "weight_scale", ml_dtypes.float8_e4m3fn).astype(np.float32)
	            g = get(p + "weight_global_scale", np.float32)[0]
	            codes = np.stack([c & 15, c >> 4], -1).reshape(c.shape[0], -1)
	            want.append(E2M1[codes] * np.repeat(s, 16, 1) * (np.float32(1) / g))
	            globals_.add(float(g))
	        got = open("%s/blk.%d.ffn_%s_exps.weight.f32" % (sys.argv[2], blk, proj), "rb").read()
	        assert got == np.concatenate(want).astype("<f4").tobytes(), (blk, proj)
	        done += 1
	print(done, len(globals_))
	EOF
	[ "$output" = "15 60" ]
}

@test "quant-nvfp4 copies the NVFP4 experts and their scale vectors: every tensor is llama.cpp's converter's" {
	need_py numpy gguf
	quant-nvfp4 -t 2 --type F32 "$N" "$BATS_TEST_TMPDIR/o.gguf" 2>/dev/null
	run -0 python3 - "$BATS_TEST_TMPDIR/o.gguf" "$N/llamacpp-nvfp4.gguf" <<-'EOF'
	import sys, gguf
	a, b = ({t.name: t for t in gguf.GGUFReader(f).tensors} for f in sys.argv[1:3])
	assert sorted(a) == sorted(b), sorted(set(a) ^ set(b))
	for k, t in b.items():
	    assert a[k].tensor_type == t.tensor_type and list(a[k].shape) == list(t.shape), k
	    assert a[k].data.tobytes() == t.data.tobytes(), k
	s = [k for k in b if k.endswith("_exps.scale")]
	assert len(s) == 15 and all(len(set(b[k].data.tolist())) == 4 for k in s), s
	print(len(b))
	EOF
	[ "$output" = 108 ]
}

# The same experts in NVIDIA ModelOpt's layout (<p>.weight U8, <p>.weight_scale_2 = the
# float32 1/global, hf_quant_config.json) give the same GGUF, tensor for tensor.
@test "the ModelOpt layout of the same NVFP4 experts gives the same GGUF" {
	need_py numpy ml_dtypes safetensors gguf
	d=$BATS_TEST_TMPDIR/mo
	mkdir "$d"
	cp "$N/tokenizer.json" "$N/tokenizer_config.json" "$d/"
	python3 - "$TOP/tools/make-nvfp4-fixtures.py" "$N" "$d" <<-'EOF'
	import importlib.util, json, sys
	import numpy as np
	spec = importlib.util.spec_from_file_location("nv", sys.argv[1])
	nv = importlib.util.module_from_spec(spec)
	spec.loader.exec_module(nv)
	out = {}
	for k, v in nv.read_st(sys.argv[2] + "/model.safetensors").items():
	    if k.endswith(".weight_packed"):
	        out[k[:-len("_packed")]] = v
	    elif k.endswith(".weight_global_scale"):
	        out[k[:-len("global_scale")] + "scale_2"] = np.array(np.float32(1) / v[0], np.float32)
	    else:
	        out[k] = v
	nv.write_st(out, sys.argv[3] + "/model.safetensors")
	c = json.load(open(sys.argv[2] + "/config.json"))
	del c["quantization_config"]
	json.dump(c, open(sys.argv[3] + "/config.json", "w"))
	json.dump({"producer": {"name": "modelopt", "version": "0.39.0"},
	           "quantization": {"quant_algo": "NVFP4", "group_size": 16}},
	          open(sys.argv[3] + "/hf_quant_config.json", "w"))
	EOF
	quant-nvfp4 -t 2 --type F32 "$d" "$BATS_TEST_TMPDIR/mo.gguf" 2>/dev/null
	run -0 python3 - "$BATS_TEST_TMPDIR/mo.gguf" "$N/llamacpp-nvfp4.gguf" <<-'EOF'
	import sys, gguf
	a, b = ({t.name: t for t in gguf.GGUFReader(f).tensors} for f in sys.argv[1:3])
	assert sorted(a) == sorted(b), sorted(set(a) ^ set(b))
	assert all(a[k].data.tobytes() == t.data.tobytes() for k, t in b.items())
	print(len(b))
	EOF
	[ "$output" = 108 ]
}

# Moving a power of two from an expert's block scales (UE4M3 exponents) into its entry of the
# stack's .scale keeps each of its products' bits (the block sums scale exactly), so the logits
# stay bit for bit only when each expert's products take that expert's own entry; the moved
# blocks with the old scales change them (the test's teeth).
@test "each expert's products take its own entry of the .scale vector (llama.cpp's GGUF, powers of two moved)" {
	need_py numpy gguf
	run -0 python3 - "$N/llamacpp-nvfp4.gguf" "$BATS_TEST_TMPDIR" <<-'EOF'
	import shutil, sys, gguf
	import numpy as np
	for out, move_scale in (("moved", 1), ("wrong", 0)):
	    f = "%s/%s.gguf" % (sys.argv[2], out)
	    shutil.copy(sys.argv[1], f)
	    t = {x.name: x for x in gguf.GGUFReader(f, "r+").tensors}
	    n = 0
	    for k in t:
	        if not k.endswith("_exps.scale"):
	            continue
	        blocks = t[k[:-len("scale")] + "weight"].data.reshape(4, -1, 36)
	        for e, p in enumerate((1, 2, 0, 1)):
	            d = blocks[e, :, :4]
	            assert ((d >> 3) > p).all()	# every block scale stays a normal UE4M3
	            d -= np.uint8(p << 3)
	            if move_scale:
	                t[k].data[e] *= np.float32(2.0 ** p)
	        n += 1
	    print(out, n)
	EOF
	"$ML" -t 2 "$N/llamacpp-nvfp4.gguf" "$BATS_TEST_TMPDIR/base" $IDS
	"$ML" -t 2 "$BATS_TEST_TMPDIR/moved.gguf" "$BATS_TEST_TMPDIR/moved" $IDS
	cmp "$BATS_TEST_TMPDIR/base" "$BATS_TEST_TMPDIR/moved"
	"$ML" -t 2 "$BATS_TEST_TMPDIR/wrong.gguf" "$BATS_TEST_TMPDIR/wrong" $IDS
	! cmp -s "$BATS_TEST_TMPDIR/base" "$BATS_TEST_TMPDIR/wrong" || false
}

# The HF checkpoint and llama.cpp's GGUF of it take the same NVFP4 products; they differ only
# by the GDN L2 norm rule (t/model.bats), 1.5e-4 at most on these models.  Greedy decoding
# gives transformers' ids on the values the checkpoint encodes (refs.json).
@test "the NVFP4 checkpoint and its GGUF give the same logits but for the GDN norm rule; greedy ids are transformers'" {
	need_py numpy
	"$ML" -t 2 "$N" "$BATS_TEST_TMPDIR/hf" $IDS
	"$ML" -t 2 "$N/llamacpp-nvfp4.gguf" "$BATS_TEST_TMPDIR/gg" $IDS
	run -0 python3 -c 'import numpy as np,sys; a,b=(np.fromfile(f,dtype=np.float32).reshape(16,-1) for f in sys.argv[1:]); r=(np.abs(a-b).max(1)/np.abs(a).max(1)).max(); print(r); assert r <= 2e-4 and (a.argmax(1) == b.argmax(1)).all()' "$BATS_TEST_TMPDIR/hf" "$BATS_TEST_TMPDIR/gg"
	want=$(refs_greedy "$N")
	for m in "$N" "$N/llamacpp-nvfp4.gguf"; do
		run -0 --separate-stderr "$MG" -t 2 "$m" 16 5 17 250 3 99 42 7 1
		[ "$output" = "$want" ]
		run -0 --separate-stderr "$MG" -t 2 -p "$m" 16 5 17 250 3 99 42 7 1
		[ "$output" = "$want" ]
	done
	batch_identical "$N"
}

# Its MTP block's experts are NVFP4 too (random: never accepted greedily, as above); the GGUF
# is quant-nvfp4's (llama.cpp's tensors, and a tokenizer).
@test "run-spec on the NVFP4 checkpoint's MTP block (NVFP4 experts, a scale each): identical to plain" {
	quant-nvfp4 -t 2 --type F32 "$N" "$BATS_TEST_TMPDIR/o.gguf" 2>/dev/null
	for m in "$N" "$BATS_TEST_TMPDIR/o.gguf"; do
		# exit 1 when no draft was accepted (the HF checkpoint), 0 when some were (the GGUF)
		run --separate-stderr run-spec --raw -K 1-3 -n 16 -t 2 --ignore-eos "$m" "hello world"
		[ "$status" -le 1 ]
		[ "$(grep -c 'PASS (identical to plain)' <<<"$output")" = 3 ]
		! grep -q 'FAIL (' <<<"$output" || false
		run -0 --separate-stderr run-spec --raw -K 1-3 -n 16 -t 2 --ignore-eos --temp 0.8 --seed 3 "$m" "hello world"
		[ "${lines[-1]}" = "SELF-CONSISTENCY PASS" ]
	done
}

@test "an NVFP4 expert without its global scale, or a stack not all NVFP4, is an error naming it" {
	need_py json
	d=$BATS_TEST_TMPDIR/m
	mkdir "$d"
	cp "$N/"*.json "$d/"
	# rewrite.py IN OUT OLD [NEW]: IN without tensor OLD (or with it renamed NEW, its rows
	# twice as long: plain U8 of the expert's shape) as OUT
	cat >"$BATS_TEST_TMPDIR/rewrite.py" <<-'EOF'
	import json, struct, sys
	buf = open(sys.argv[1], "rb").read()
	n = struct.unpack("<Q", buf[:8])[0]
	hdr = json.loads(buf[8:8 + n])
	v = hdr.pop(sys.argv[3])
	if len(sys.argv) > 4:
	    hdr[sys.argv[4]] = dict(v, shape=[v["shape"][0], 2 * v["shape"][1]], wide=1)
	data, off = b"", 0
	for k, v in hdr.items():
	    if k == "__metadata__":
	        continue
	    a, b = v["data_offsets"]
	    x = buf[8 + n + a:8 + n + b] * (2 if v.pop("wide", 0) else 1)
	    data += x
	    v["data_offsets"] = [off, off + len(x)]
	    off += len(x)
	h = json.dumps(hdr).encode()
	h += b" " * (-len(h) % 8)
	open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + data)
	EOF
	p=model.layers.2.mlp.experts.3.up_proj
	python3 "$BATS_TEST_TMPDIR/rewrite.py" "$N/model.safetensors" "$d/model.safetensors" \
	    $p.weight_global_scale
	run -1 --separate-stderr run-gen --raw -n 1 -t 2 "$d" hi
	[ "$stderr" = "run-gen: $d: tensor '$p.weight_packed': NVFP4 without its per-tensor scale '$p.weight_global_scale'" ]
	python3 "$BATS_TEST_TMPDIR/rewrite.py" "$N/model.safetensors" "$d/model.safetensors" \
	    $p.weight_packed $p.weight
	run -1 --separate-stderr quant-nvfp4 "$d" "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "quant-nvfp4: $d: 'blk.2.ffn_up_exps.weight': expert 3 is not NVFP4 like the others" ]
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
	! grep -q 'FAIL (' <<<"$output" || false
}
