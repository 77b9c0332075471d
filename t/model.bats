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
