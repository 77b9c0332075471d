bats_require_minimum_version 1.5.0
# lib/model end to end through build/t/tools/model-greedy: the llama path on
# SmolLM2 (GGUF, Q4_1, tied head, rope NORM mode) and both weight sources.
setup() {
	load helper
	MG=$TOP/build/t/tools/model-greedy
	[ -x "$MG" ] || skip "build/t/tools/model-greedy not built (make units)"
}

@test "SmolLM2 continues a count: '1, 2, 3, 4, 5, ' -> '6, 7, 8,'" {
	f=$(smollm2)
	# ids of "1" "," " " "2" ... "5" "," " " in SmolLM2's vocabulary (digits 33.., ',' 28, 'Ġ' 216)
	run -0 --separate-stderr "$MG" -t 2 "$f" 8 33 28 216 34 28 216 35 28 216 36 28 216 37 28 216
	[ "$output" = "38 28 216 39 28 216 40 28" ]
}

@test "prefill and token-by-token feeding agree on SmolLM2" {
	f=$(smollm2)
	run -0 --separate-stderr "$MG" -t 2 -p "$f" 8 33 28 216 34 28 216 35 28 216 36 28 216 37 28 216
	[ "$output" = "38 28 216 39 28 216 40 28" ]
}

@test "model A greedy from the HF checkpoint equals refs.json b_greedy[0]" {
	d=$(model_a)
	need_py json
	ids=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["b_greedy"][0]; print(" ".join(map(str,r["input_ids"]))); print(" ".join(map(str,r["new_ids"][:16])))' "$d/refs.json")
	prompt=$(sed -n 1p <<<"$ids")
	want=$(sed -n 2p <<<"$ids")
	run -0 --separate-stderr "$MG" -t 2 -p "$d" 16 $prompt
	[ "$output" = "$want" ]
}

@test "a missing model fails with 1 and names it" {
	run -1 --separate-stderr "$MG" "$BATS_TEST_TMPDIR/none.gguf" 1 1
	[[ $stderr == "model-greedy: $BATS_TEST_TMPDIR/none.gguf"* ]]
}

@test "bad arguments are a usage error" {
	run -2 --separate-stderr "$MG" x 0 1
	run -2 --separate-stderr "$MG" -t x y 1 1
}

# ML MODEL OUT ID...: build/t/tools/model-logits (every position's logits, float32)
ML=build/t/tools/model-logits

@test "tiny random models: logits of every position equal transformers' (refs.json) to 1e-4 relative" {
	need_py numpy
	for m in q35-r2 q35-r1-tied q35-r4 llama-tiny; do
		run -0 --separate-stderr python3 "$TOP/t/peer/logits_vs_refs.py" "$TOP/$ML" "$DATA/tiny/$m" "$DATA/tiny/$m/refs.json" 1e-4
		[ "${#lines[@]}" = 3 ]
	done
}

@test "tiny random models: token-by-token logits agree with the prefill's to 1e-5 relative" {
	need_py numpy
	for m in q35-r2 q35-r1-tied q35-r4 llama-tiny; do
		"$TOP/$ML" -t 2 "$DATA/tiny/$m" "$BATS_TEST_TMPDIR/p" 5 17 250 3 99 99 99 42 7 1 0 310 64 64 128 9
		"$TOP/$ML" -t 2 -1 "$DATA/tiny/$m" "$BATS_TEST_TMPDIR/d" 5 17 250 3 99 99 99 42 7 1 0 310 64 64 128 9
		run -0 python3 -c 'import numpy as np,sys; a,b=(np.fromfile(f,dtype=np.float32).reshape(16,-1) for f in sys.argv[1:]); assert (np.abs(a-b).max(axis=1)/np.abs(a).max(axis=1)).max() <= 1e-5' "$BATS_TEST_TMPDIR/p" "$BATS_TEST_TMPDIR/d"
	done
}

@test "F16 KV cache: prefill and token-by-token logits are bit-identical (llama-tiny, SmolLM2)" {
	f=$(smollm2)
	ids="5 17 250 3 99 99 99 42 7 1 0 310 64 64 128 9"
	for m in "$DATA/tiny/llama-tiny" "$f"; do
		"$TOP/$ML" -t 2 -k f16 "$m" "$BATS_TEST_TMPDIR/p" $ids
		"$TOP/$ML" -t 3 -k f16 -1 "$m" "$BATS_TEST_TMPDIR/d" $ids
		"$TOP/$ML" -t 2 -k f32 "$m" "$BATS_TEST_TMPDIR/f" $ids
		cmp "$BATS_TEST_TMPDIR/p" "$BATS_TEST_TMPDIR/d"
		! cmp -s "$BATS_TEST_TMPDIR/p" "$BATS_TEST_TMPDIR/f"
	done
}

# The GGUF path normalizes the GDN q and k as llama.cpp does (x / max(|x|, eps)), the HF path as
# transformers does (x * rsqrt(|x|^2 + 1e-6)); that is the whole difference: with the same norm on
# both the F32 GGUF gives bit-identical logits (measured), so F32 is held to 2e-5 relative and F16
# (model A's weights are 16-bit already) to the same.
@test "model A: HF safetensors and quant-nvfp4's F32 and F16 GGUF of it give the same logits" {
	d=$(model_a)
	need_py numpy
	ids="970 11 1879 374 264 1273 13 576 3974 1387 3883 3420 916 279 1567 556"
	"$TOP/$ML" -t 2 "$d" "$BATS_TEST_TMPDIR/hf" $ids
	for ty in F32 F16; do
		quant-nvfp4 -t 2 --type $ty "$d" "$BATS_TEST_TMPDIR/a.gguf" 2>/dev/null
		"$TOP/$ML" -t 2 "$BATS_TEST_TMPDIR/a.gguf" "$BATS_TEST_TMPDIR/gg" $ids
		run -0 python3 -c 'import numpy as np,sys; a,b=(np.fromfile(f,dtype=np.float32) for f in sys.argv[1:]); r=np.abs(a-b).max()/np.abs(a).max(); print(r); assert r <= 2e-5' "$BATS_TEST_TMPDIR/hf" "$BATS_TEST_TMPDIR/gg"
	done
}
