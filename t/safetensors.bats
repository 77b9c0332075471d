#!/usr/bin/env bats
# lib/safetensors' HF -> GGUF conversion plan, checked against a numpy
# reimplementation of llama.cpp's converter rules (t/peer/st_convert.py)
# through build/t/tools/st-dump.
bats_require_minimum_version 1.5.0
setup() { load helper; DUMP="$TOP/build/t/tools/st-dump"; }

convert_matches_numpy() {	# convert_matches_numpy CHECKPOINT
	mkdir -p "$BATS_TEST_TMPDIR/out"
	"$DUMP" "$1" "$BATS_TEST_TMPDIR/out" >"$BATS_TEST_TMPDIR/plan.tsv"
	run -0 python3 "$TOP/t/peer/st_convert.py" "$1" "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/plan.tsv"
	[[ ${lines[-1]} == *" tensors, 0 failures" ]]
}

@test "llama fixture: names, shapes and rope-permuted q/k rows match the converter" {
	need_py numpy
	convert_matches_numpy "$DATA/st/llama"
	[ "${lines[-1]}" = "20 tensors, 0 failures" ]
}

@test "released qwen35 fixture: text_config, language_model prefix, unlisted mtp file, V-head reorder" {
	need_py numpy
	convert_matches_numpy "$DATA/st/qwen35"
	[ "${lines[-1]}" = "68 tensors, 0 failures" ]
	run -0 "$DUMP" "$DATA/st/qwen35"
	[[ $output != *visual* ]]
}

@test "model A (bf16, 3 shards): every tensor maps and converts as numpy says" {
	need_py numpy
	a=$(model_a)
	convert_matches_numpy "$a"
	[ "${lines[-1]}" = "124 tensors, 0 failures" ]
}

@test "model A metadata follows formats.md 3.1" {
	a=$(model_a)
	run -0 "$DUMP" "$a"
	[[ $output == *$'kv\tqwen35.block_count\tu32\t9'* ]]
	[[ $output == *$'kv\tqwen35.nextn_predict_layers\tu32\t1'* ]]
	[[ $output == *$'kv\tqwen35.rope.dimension_count\tu32\t16'* ]]
	[[ $output == *$'kv\tqwen35.ssm.time_step_rank\tu32\t8'* ]]
	[[ $output == *$'kv\tqwen35.ssm.inner_size\tu32\t512'* ]]
	[[ $output == *$'kv\tqwen35.rope.dimension_sections\tarr\t4\t11\t11\t10\t0'* ]]
	run -0 "$DUMP" --nomtp "$a"
	[[ $output == *$'kv\tqwen35.block_count\tu32\t8'* ]]
	[[ $output != *nextn* ]]
}

@test "a checkpoint with a damaged shard fails naming the file" {
	mkdir "$BATS_TEST_TMPDIR/m"
	cp "$DATA/st/llama/config.json" "$BATS_TEST_TMPDIR/m/"
	head -c 100 "$DATA/st/llama/model.safetensors" >"$BATS_TEST_TMPDIR/m/model.safetensors"
	run -1 --separate-stderr "$DUMP" "$BATS_TEST_TMPDIR/m"
	[[ $stderr == "st-dump: $BATS_TEST_TMPDIR/m/model.safetensors: header length "*" past the end of the file" ]]
}

tokenizer_matches_llama_cpp() {	# tokenizer_matches_llama_cpp CHECKPOINT
	"$DUMP" --tokenizer --kvjson "$1" >"$BATS_TEST_TMPDIR/kv.json"
	run -0 python3 "$TOP/t/peer/st_tokenizer.py" "$1" "$BATS_TEST_TMPDIR/kv.json"
	[[ ${lines[-1]} == *" keys, 0 differences" ]]
}

@test "llama fixture tokenizer: tokens, types, merges, special ids, flags, template as llama.cpp's converter" {
	need_py gguf tokenizers
	tokenizer_matches_llama_cpp "$DATA/st/llama"
	run -0 "$DUMP" --tokenizer "$DATA/st/llama"
	[[ $output == *$'kv\ttokenizer.ggml.pre\tstr\t9'* ]]	# llama-bpe, from the llama3 regex
}

@test "model A tokenizer converts as llama.cpp's converter would, pre qwen2" {
	need_py gguf tokenizers
	a=$(model_a)
	tokenizer_matches_llama_cpp "$a"
	run -0 "$DUMP" --tokenizer --kvjson "$a"
	[[ $output == *'"tokenizer.ggml.pre": "qwen2"'* ]]
	[[ $output == *'"tokenizer.ggml.eos_token_id": 8191'* ]]
}

@test "a checkpoint without tokenizer.json cannot plan a tokenizer" {
	run -1 --separate-stderr "$DUMP" --tokenizer "$DATA/st/qwen35"
	[ "$stderr" = "st-dump: $DATA/st/qwen35: no tokenizer.json" ]
}

@test "general.name is the checkpoint directory's name, trailing slash or not" {
	run -0 "$DUMP" --kvjson "$DATA/st/llama/"
	[[ $output == *'"general.name": "llama"'* ]]
}

@test "FP8 weights read through their block scales (ragged blocks, rope permutation)" {
	need_py numpy
	convert_matches_numpy "$DATA/st/fp8"
	[ "${lines[-1]}" = "11 tensors, 0 failures" ]
	run -0 "$DUMP" "$DATA/st/fp8"
	[[ $output != *scale_inv$'\n'* ]]
	[[ $output == *$'tensor\tblk.0.attn_q.weight\t2\t16\t16\t1\t1\tF8_E4M3\t0\t'* ]]
}
