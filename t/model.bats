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

# A llama model sums its attention as llama.cpp does, in the orders of its kernels for a batch of
# rows (a prompt prefill) or for one row (decode, verify).  Each form is bit-identical whatever the
# threads and the batch (a row of a 9-row prefill is that row of an 18-row one); the two forms
# differ as llama.cpp's own prefill and decode do (SmolLM2's Q8_1 activations make an ulp of
# attention up to a few percent of a logit) but pick the same tokens.
@test "llama attention: prefill rows and decoded rows each bit-identical across threads and batch sizes" {
	f=$(smollm2)
	need_py numpy
	ids="5 17 250 3 99 99 99 42 7 1 0 310 64 64 128 9 22 23"
	for m in "$DATA/tiny/llama-tiny" "$f"; do
		for kv in f16 f32; do
			"$TOP/$ML" -t 2 -k $kv "$m" "$BATS_TEST_TMPDIR/p" $ids
			"$TOP/$ML" -t 3 -k $kv "$m" "$BATS_TEST_TMPDIR/p3" $ids
			"$TOP/$ML" -t 2 -k $kv -1 "$m" "$BATS_TEST_TMPDIR/d" $ids
			"$TOP/$ML" -t 3 -k $kv -1 "$m" "$BATS_TEST_TMPDIR/d3" $ids
			"$TOP/$ML" -t 2 -k $kv -p 9 "$m" "$BATS_TEST_TMPDIR/g" ${ids% 22 23}
			cmp "$BATS_TEST_TMPDIR/p" "$BATS_TEST_TMPDIR/p3"
			cmp "$BATS_TEST_TMPDIR/d" "$BATS_TEST_TMPDIR/d3"
			run -0 python3 -c 'import numpy as np,sys; p,d=(np.fromfile(f,dtype=np.float32).reshape(18,-1) for f in sys.argv[1:3]); g=np.fromfile(sys.argv[3],dtype=np.float32).reshape(16,-1); assert (g[:9]==p[:9]).all(); assert (p.argmax(1)==d.argmax(1)).all()' "$BATS_TEST_TMPDIR/p" "$BATS_TEST_TMPDIR/d" "$BATS_TEST_TMPDIR/g"
		done
		"$TOP/$ML" -t 2 -k f16 "$m" "$BATS_TEST_TMPDIR/h" $ids
		! cmp -s "$BATS_TEST_TMPDIR/h" "$BATS_TEST_TMPDIR/p" || false
	done
}

# The GGUF path normalizes the GDN q and k as llama.cpp does (x / max(|x|, eps)), the HF path as
# transformers does (x * rsqrt(|x|^2 + 1e-6)); that is the whole difference: with the same norm on
# both the F32 GGUF gives bit-identical logits (measured), so F32 is held to 2e-5 relative and F16
# (model A's weights are 16-bit already) to the same.
# llama.cpp's numerics are not the host's SIMD: the CPU backend's portable paths (cpu:scalar) give
# SmolLM2 the logits of its AVX2 paths bit for bit, either cache, prefill and decode (the quantized
# products' two paths are the same bits too: t/unit/quant), so the goldens hold on any x86-64.
@test "SmolLM2: cpu:scalar gives the logits of the AVX2 paths bit for bit (F16 and F32 caches)" {
	f=$(smollm2)
	ids="5 17 250 3 99 99 99 42 7 1 0 310 64 64 128 9"
	for kv in f16 f32; do
		for way in -p16 -1; do
			"$TOP/$ML" -t 2 -k $kv $way "$f" "$BATS_TEST_TMPDIR/a" $ids
			"$TOP/$ML" -t 2 -d cpu:scalar -k $kv $way "$f" "$BATS_TEST_TMPDIR/s" $ids
			cmp "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/s"
		done
	done
}

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

# GS N IN PREFIX: build/t/tools/gguf-split (llama.cpp's gguf-split layout)
GS=build/t/tools/gguf-split

@test "a split GGUF set (3 parts) loads from any part: same ids and bit-identical logits as the file" {
	f=$(smollm2)
	s=$BATS_TEST_TMPDIR/s
	"$TOP/$GS" 3 "$f" "$s"
	run -0 --separate-stderr run-gen --raw --ids -n 8 -t 2 "$f" "The capital of France is"
	want=$output
	[ -n "$want" ]
	for k in 1 2 3; do
		run -0 --separate-stderr run-gen --raw --ids -n 8 -t 2 "$s-0000$k-of-00003.gguf" "The capital of France is"
		[ "$output" = "$want" ]
	done
	ids="5 17 250 3 99 42 7 1"
	"$TOP/$ML" -t 2 "$f" "$BATS_TEST_TMPDIR/one" $ids
	"$TOP/$ML" -t 2 "$s-00002-of-00003.gguf" "$BATS_TEST_TMPDIR/set" $ids
	cmp "$BATS_TEST_TMPDIR/one" "$BATS_TEST_TMPDIR/set"
}

@test "the split parts are llama.cpp's: gguf-py reads each, gguf-inspect shows split.*, llama.cpp's greedy ids on the set equal ours" {
	f=$(smollm2)
	need_py gguf
	s=$BATS_TEST_TMPDIR/s
	"$TOP/$GS" 3 "$f" "$s"
	run -0 python3 -c 'import sys; from gguf import GGUFReader
n = 0
for k, p in enumerate(sys.argv[1:]):
    r = GGUFReader(p)
    v = {f.name: int(f.parts[-1][0]) for f in r.fields.values() if f.name.startswith("split.")}
    assert v == {"split.no": k, "split.count": 3, "split.tensors.count": 272}, v
    n += len(r.tensors)
print(n)' "$s"-0000{1,2,3}-of-00003.gguf
	[ "$output" = 272 ]
	run -0 gguf-inspect "$s-00002-of-00003.gguf"
	[[ $output == *"split.no             uint16  1"* ]]
	[[ $output == *"split.count          uint16  3"* ]]
	need_llama_cpp
	run -0 --separate-stderr python3 "$TOP/t/peer/llama_greedy.py" "$s-00001-of-00003.gguf" 8 "The capital of France is"
	want=$output
	run -0 --separate-stderr run-gen --raw --ids -n 8 -t 2 --kv-type f16 "$s-00001-of-00003.gguf" "The capital of France is"
	[ "$output" = "$want" ]
}

@test "a split set with a missing part, a stray part, a wrong tensor count or a renamed part is an error naming the file" {
	f=$(smollm2)
	s=$BATS_TEST_TMPDIR/s
	"$TOP/$GS" 3 "$f" "$s"
	"$TOP/$GS" 2 "$f" "$BATS_TEST_TMPDIR/two"
	mv "$s-00002-of-00003.gguf" "$BATS_TEST_TMPDIR/p2"
	run -1 --separate-stderr run-gen --ids -n 1 -t 2 "$s-00001-of-00003.gguf" hi
	[ "$stderr" = "run-gen: $s-00002-of-00003.gguf: No such file or directory" ]
	cp "$BATS_TEST_TMPDIR/two-00002-of-00002.gguf" "$s-00002-of-00003.gguf"
	run -1 --separate-stderr run-gen --ids -n 1 -t 2 "$s-00003-of-00003.gguf" hi
	[ "$stderr" = "run-gen: $s-00002-of-00003.gguf: 'split.count' is 2, expected 3" ]
	cp "$s-00003-of-00003.gguf" "$s-00002-of-00003.gguf"
	run -1 --separate-stderr run-gen --ids -n 1 -t 2 "$s-00001-of-00003.gguf" hi
	[ "$stderr" = "run-gen: $s-00002-of-00003.gguf: 'split.no' is 2, expected 1" ]
	"$TOP/$GS" -c 271 3 "$f" "$s"
	run -1 --separate-stderr run-gen --ids -n 1 -t 2 "$s-00003-of-00003.gguf" hi
	[ "$stderr" = "run-gen: $s-00001-of-00003.gguf: 'split.tensors.count' is 271 but the 3 parts hold 272 tensors" ]
	cp "$s-00001-of-00003.gguf" "$BATS_TEST_TMPDIR/renamed.gguf"
	run -1 --separate-stderr run-gen --ids -n 1 -t 2 "$BATS_TEST_TMPDIR/renamed.gguf" hi
	[ "$stderr" = "run-gen: $BATS_TEST_TMPDIR/renamed.gguf: split part 1 of 3 is not named PREFIX-00001-of-00003.gguf" ]
}
