#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
setup() { load helper; T=$BATS_TEST_TMPDIR; }

# peer_check CHECKPOINT OUT.gguf: gguf-py loads OUT; every tensor within its type's error bound
# of the numpy-converted checkpoint; every planned metadata value present
peer_check() {
	need_py gguf numpy tokenizers
	"$TOP/build/t/tools/st-dump" --tokenizer --kvjson "$1" >"$T/kv.json"
	run -0 python3 "$TOP/t/peer/st_quant.py" "$1" "$2" "$T/kv.json"
	[[ ${lines[-1]} == *" tensors, 0 failures" ]]
}

# gguf_types FILE: "name type" per tensor, by gguf-py
gguf_types() {
	python3 -c 'import sys, gguf
for t in gguf.GGUFReader(sys.argv[1]).tensors: print(t.name, t.tensor_type.name)' "$1"
}

@test "--help prints the usage of the man page's synopsis" {
	run -0 quant-nvfp4 --help
	[ "${lines[0]}" = "usage: quant-nvfp4 [-nv] [-t threads] [--type type] [--tensor-type regex=type]" ]
	[ "${lines[1]}" = "       [--keep regex] [--no-mtp] [--tokenizer-pre name] in out" ]
}

@test "misuse exits 2: unknown option, bad type, thread count, rule, operands" {
	run -2 quant-nvfp4 --bogus a b
	run -2 --separate-stderr quant-nvfp4 --type Q9_9 a b
	[ "${stderr_lines[0]}" = "quant-nvfp4: --type 'Q9_9': not a type quant-nvfp4 can write" ]
	run -2 --separate-stderr quant-nvfp4 -t 0 a b
	[ "${stderr_lines[0]}" = "quant-nvfp4: -t '0': not a thread count in [1, 256]" ]
	run -2 quant-nvfp4 -t 257 a b
	run -2 --separate-stderr quant-nvfp4 --tensor-type attn a b
	[ "${stderr_lines[0]}" = "quant-nvfp4: --tensor-type 'attn': not REGEX=TYPE" ]
	run -2 quant-nvfp4 --keep '(' a b
	run -2 quant-nvfp4 a
	run -2 quant-nvfp4 a b c
}

@test "dry run prints the default recipe: NVFP4 matrices, Q5_K head with block fallback, F32 norms" {
	a=$(model_a)
	run -0 --separate-stderr quant-nvfp4 -n "$a"
	[[ ${lines[0]} == "tensor "*"shape"*"from"*"to"*"bytes"*"rule" ]]
	[[ $output == *$'\n'"token_embd.weight "*" BF16 "*" Q5_1 "*"embd/output (block fallback)"* ]]
	[[ $output == *$'\n'"blk.0.attn_qkv.weight "*" 384x1024 "*" BF16 "*" NVFP4 "*"bulk"* ]]
	[[ $output == *$'\n'"blk.0.ssm_conv1d.weight "*" 4x1024 "*" F32 "*"conv"* ]]
	[[ $output == *$'\n'"blk.8.nextn.enorm.weight "*" F32 "* ]]
	[ "${lines[-1]}" = "124 tensors, 14330496 bytes of tensor data" ]
	[ -z "$stderr" ]
}

@test "model A to the default recipe loads in gguf-py within NVFP4/Q5 error bounds, with metadata" {
	a=$(model_a)
	run -0 quant-nvfp4 "$a" "$T/a.gguf"
	peer_check "$a" "$T/a.gguf"
	run -0 python3 -c 'import sys, gguf; r = gguf.GGUFReader(sys.argv[1])
print(r.fields["general.file_type"].contents(), r.fields["tokenizer.ggml.pre"].contents())' "$T/a.gguf"
	[ "$output" = "39 qwen2" ]
}

@test "model A to IQ4_XS: rows of whole super-blocks IQ4_XS, the others IQ4_NL as llama-quantize falls back" {
	a=$(model_a)
	run -0 --separate-stderr quant-nvfp4 -n --type IQ4_XS "$a"
	[[ $output == *$'\n'"blk.0.ffn_down.weight "*" 1024x384 "*" BF16 "*" IQ4_XS "*"bulk"* ]]
	[[ $output == *$'\n'"blk.3.attn_q.weight "*" 384x512 "*" BF16 "*" IQ4_NL "*"bulk (block fallback)"* ]]
	run -0 quant-nvfp4 --type IQ4_XS "$a" "$T/iq4.gguf"
	peer_check "$a" "$T/iq4.gguf"
	run -0 gguf_types "$T/iq4.gguf"
	[[ $output == *"blk.0.ffn_down.weight IQ4_XS"* && $output == *"blk.3.attn_output.weight IQ4_XS"* ]]
	[[ $output == *"blk.0.ssm_out.weight IQ4_XS"* && $output == *"blk.3.attn_q.weight IQ4_NL"* ]]
}

@test "model A to F32 and F16 GGUF: every matrix in the bulk type, values exact" {
	a=$(model_a)
	for ty in F32 F16; do
		run -0 quant-nvfp4 --type $ty "$a" "$T/$ty.gguf"
		peer_check "$a" "$T/$ty.gguf"
		run -0 gguf_types "$T/$ty.gguf"
		[[ $output == *"token_embd.weight $ty"* && $output == *"blk.3.attn_q.weight $ty"* ]]
		[[ $output == *"blk.3.attn_q_norm.weight F32"* ]]
	done
}

@test "-v reports the rms error of every tensor" {
	a=$(model_a)
	run -0 --separate-stderr quant-nvfp4 -v "$a" "$T/a.gguf"
	[ "$(grep -c 'rms error' <<<"$stderr")" = 124 ]
	[[ $stderr == *"quant-nvfp4: blk.0.attn_qkv.weight "*"BF16   -> NVFP4  rms error "*"(relative 0.09"* ]]
}

@test "--tensor-type rules: first match wins, before the recipe" {
	a=$(model_a)
	run -0 quant-nvfp4 -n --tensor-type 'attn_qkv=Q8_0' --tensor-type 'attn_=Q4_0' --tensor-type 'qkv=F16' "$a"
	[[ $output == *$'\n'"blk.0.attn_qkv.weight "*" Q8_0 "*"attn_qkv=Q8_0"* ]]
	[[ $output == *$'\n'"blk.0.attn_gate.weight "*" Q4_0 "*"attn_=Q4_0"* ]]
	[[ $output == *$'\n'"blk.0.ffn_up.weight "*" NVFP4 "*"bulk"* ]]
}

@test "--keep copies a tensor's bytes verbatim; a transformed one is re-encoded in its type" {
	a=$(model_a)
	run -0 quant-nvfp4 --keep 'blk\.0\.(ffn_up|attn_norm)' "$a" "$T/k.gguf"
	peer_check "$a" "$T/k.gguf"
	run -0 gguf_types "$T/k.gguf"
	[[ $output == *"blk.0.ffn_up.weight BF16"* && $output == *"blk.0.attn_norm.weight BF16"* ]]
	[[ $output == *"blk.1.ffn_up.weight NVFP4"* ]]
}

@test "the same output for any thread count, to a file or to stdout" {
	a=$(model_a)
	quant-nvfp4 -t 1 "$a" "$T/t1.gguf"
	quant-nvfp4 -t 3 "$a" "$T/t3.gguf"
	cmp "$T/t1.gguf" "$T/t3.gguf"
	quant-nvfp4 "$a" - >"$T/out.gguf"
	cmp "$T/t1.gguf" "$T/out.gguf"
}

@test "requantizing an F32 GGUF equals converting directly, from a file or from stdin" {
	a=$(model_a)
	quant-nvfp4 --type F32 "$a" "$T/f32.gguf"
	quant-nvfp4 "$a" "$T/direct.gguf"
	run -0 quant-nvfp4 "$T/f32.gguf" "$T/re.gguf"
	cmp "$T/direct.gguf" "$T/re.gguf"
	quant-nvfp4 - "$T/stdin.gguf" <"$T/f32.gguf"
	cmp "$T/direct.gguf" "$T/stdin.gguf"
	quant-nvfp4 - - <"$T/f32.gguf" | cmp "$T/direct.gguf" -
}

@test "requantizing keeps the input's own types where the rule asks for them" {
	a=$(model_a)
	quant-nvfp4 "$a" "$T/q.gguf"
	run -0 quant-nvfp4 -n "$T/q.gguf"
	[[ $output == *$'\n'"blk.0.attn_qkv.weight "*" NVFP4 "*" NVFP4 "*"copy bulk"* ]]
	quant-nvfp4 "$T/q.gguf" "$T/q2.gguf"
	cmp "$T/q.gguf" "$T/q2.gguf"
}

@test "llama fixture converts with rope-permuted q/k and the tokenizer" {
	peer_check_dir="$DATA/st/llama"
	run -0 quant-nvfp4 --type Q8_0 "$peer_check_dir" "$T/l.gguf"
	peer_check "$peer_check_dir" "$T/l.gguf"
	run -0 gguf_types "$T/l.gguf"
	[[ $output == *"blk.0.attn_q.weight F16"* ]]	# 16 columns: no 32-block type fits
}

@test "a NaN in the source fails naming the tensor and leaves no output behind" {
	need_py numpy safetensors
	cp -r "$DATA/st/llama" "$T/nan"
	python3 -c 'import sys, numpy as np
from safetensors.numpy import load_file, save_file
p = sys.argv[1] + "/model.safetensors"; t = load_file(p)
t["model.layers.1.mlp.up_proj.weight"][3, 5] = np.nan; save_file(t, p)' "$T/nan"
	echo old >"$T/out.gguf"
	run -1 --separate-stderr quant-nvfp4 "$T/nan" "$T/out.gguf"
	[[ $stderr == "quant-nvfp4: $T/out.gguf: tensor 'blk.1.ffn_up.weight' row "*": "* ]]
	[ "$(cat "$T/out.gguf")" = old ]
	[ -z "$(ls "$T" | grep '\.tmp\.')" ]
}

@test "bad inputs fail with 1 and say why" {
	run -1 --separate-stderr quant-nvfp4 "$T/none" "$T/o.gguf"
	[ "$stderr" = "quant-nvfp4: $T/none: No such file or directory" ]
	mkdir "$T/empty"
	run -1 --separate-stderr quant-nvfp4 "$T/empty" "$T/o.gguf"
	[ "$stderr" = "quant-nvfp4: $T/empty: no .safetensors file" ]
	run -1 --separate-stderr quant-nvfp4 "$DATA/st/qwen35" "$T/o.gguf"
	[ "$stderr" = "quant-nvfp4: $DATA/st/qwen35: no tokenizer.json" ]
	printf 'GGUF\003\000\000\000' >"$T/cut.gguf"
	run -1 --separate-stderr quant-nvfp4 "$T/cut.gguf" "$T/o.gguf"
	[[ $stderr == "quant-nvfp4: $T/cut.gguf: "* ]]
	run -1 --separate-stderr quant-nvfp4 - "$T/o.gguf" <<<"not a gguf"
	[[ $stderr == "quant-nvfp4: <stdin>: "* ]]
	[ ! -e "$T/o.gguf" ]
}

@test "--no-mtp leaves the MTP block out" {
	a=$(model_a)
	run -0 quant-nvfp4 -n --no-mtp "$a"
	[[ $output != *"blk.8."* ]]
	[ "${lines[-1]%%,*}" = "109 tensors" ]
}

@test "progress shows on a terminal, not in a pipe" {
	command -v script >/dev/null || skip "script(1) not installed"
	run -0 script -qec "quant-nvfp4 '$DATA/st/llama' '$T/l.gguf'" /dev/null
	[[ $output == *"quantizing: "*"(100%)"* ]]
	run -0 --separate-stderr quant-nvfp4 "$DATA/st/llama" "$T/l2.gguf"
	[ -z "$stderr" ]
}

@test "an FP8 block-scaled checkpoint converts to the recipe" {
	run -0 quant-nvfp4 --type Q8_0 "$DATA/st/fp8" "$T/f8.gguf"
	peer_check "$DATA/st/fp8" "$T/f8.gguf"
	run -1 --separate-stderr quant-nvfp4 --keep attn_q "$DATA/st/fp8" "$T/f8k.gguf"
	[ "$stderr" = "quant-nvfp4: tensor 'blk.0.attn_q.weight': --keep: F8_E4M3 has no GGUF type" ]
}

@test "integer tensors (a d2t map) are copied, never converted to floats" {
	need_py gguf numpy
	python3 -c 'import sys, gguf, numpy as np
w = gguf.GGUFWriter(sys.argv[1], "qwen35")
w.add_tensor("d2t", np.arange(5, dtype=np.int64) * 1000003)
w.add_tensor("output.weight", np.ones((5, 64), np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()' "$T/d.gguf"
	run -0 quant-nvfp4 -n "$T/d.gguf"
	[[ ${lines[1]} == "d2t "*" I64 "*" I64 "*"copy integer" ]]
	quant-nvfp4 - - <"$T/d.gguf" >"$T/d2.gguf"
	run -0 python3 -c 'import sys, gguf
t = gguf.GGUFReader(sys.argv[1]).tensors[0]; print(t.name, t.tensor_type.name, *t.data)' "$T/d2.gguf"
	[ "$output" = "d2t I64 0 1000003 2000006 3000009 4000012" ]
}
