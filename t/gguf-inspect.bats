#!/usr/bin/env bats
# gguf-inspect: the text report, --json, --tsv, --kv, --check/--stats, stdin, errors.
bats_require_minimum_version 1.5.0
setup() { load helper; }

# patch FILE OFFSET BYTES...: overwrite bytes of a copy in place (python: no xxd needed)
patch_bytes() {
	python3 - "$@" <<'PY'
import sys
path, off, data = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
b = bytearray(open(path, "rb").read())
b[off:off + len(data)] = data
open(path, "wb").write(b)
PY
}

@test "reads a file operand: header first, then metadata, tensors and totals" {
	run -0 gguf-inspect "$DATA/tiny.gguf"
	[ "${lines[0]}" = "version 3" ]
	[ "${lines[1]}" = "alignment 32" ]
	[ "${lines[2]}" = "kv 25" ]
	[ "${lines[3]}" = "tensors 6" ]
	[ "${lines[4]}" = "data offset 1632" ]
	[[ $output == *$'\nmetadata\n'*$'\ntensors\n'*$'\ntotals\n'* ]]
	[[ $output == *"  parameters 161"* ]]
}

@test "prints every value type" {
	run -0 gguf-inspect "$DATA/tiny.gguf"
	[[ $output =~ test\.u64\ +uint64\ +18000000000000000000 ]]
	[[ $output =~ test\.i64\ +int64\ +-9000000000000000000 ]]
	[[ $output =~ test\.f32\ +float32\ +0\.5 ]]
	[[ $output =~ test\.bool\ +bool\ +true ]]
	[[ $output =~ test\.str\ +string\ +\"héllo\ \\\"world\\\"\\n\" ]]
	[[ $output =~ test\.arr\.f64\ +array\[float64\]\ +\[0\.125,\ 1e\+300\] ]]
	[[ $output =~ test\.arr\.str\ +array\[string\]\ +\[\"a\",\ \"\",\ \"tab\\there\" ]]
}

@test "long arrays are abbreviated unless --full" {
	run -0 gguf-inspect "$DATA/tiny.gguf"
	[[ $output == *"[-3, -2, -1, 0, 1, 2, 3, 4, ... 92 more]"* ]]
	run -0 gguf-inspect --full "$DATA/tiny.gguf"
	[[ $output == *"94, 95, 96]"* ]]
	[[ $output != *"more]"* ]]
}

@test "the tensor table has name, type, shape, offset and bytes" {
	run -0 gguf-inspect "$DATA/tiny.gguf"
	[[ $output =~ blk\.0\.q8_0\ +Q8_0\ +32x2\ +128\ +68 ]]
	[[ $output =~ tok_embd\.weight\ +F32\ +4x3\ +0\ +48 ]]
	[[ $output =~ Q4_0\ +1\ tensors\ +64\ parameters\ +36\ bytes ]]
}

@test "'-' and no operand read stdin" {
	run -0 gguf-inspect "$DATA/tiny.gguf"
	local want=$(printf '%s\n' "$output" | grep -v '^file size')
	run -0 gguf-inspect - <"$DATA/tiny.gguf"
	[ "$output" = "$want" ]
	run -0 gguf-inspect <"$DATA/tiny.gguf"
	[ "$output" = "$want" ]
}

@test "reads version 2 and a general.alignment of 64" {
	run -0 gguf-inspect "$DATA/v2.gguf"
	[ "${lines[0]}" = "version 2" ]
	run -0 gguf-inspect "$DATA/align64.gguf"
	[ "${lines[1]}" = "alignment 64" ]
	[[ $output =~ norm\.weight\ +F16\ +8\ +64\ +16 ]]
}

@test "--tsv prints one tensor a line: name type shape elements offset file_offset bytes" {
	run -0 gguf-inspect --tsv "$DATA/tiny.gguf"
	[ "${#lines[@]}" -eq 6 ]
	[ "${lines[0]}" = $'tok_embd.weight\tF32\t4,3\t12\t0\t1632\t48' ]
	[ "$(gguf-inspect --tsv "$DATA/tiny.gguf" | awk -F'\t' '$2 == "Q8_0" { print $1 }')" = blk.0.q8_0 ]
}

@test "--kv prints one value raw" {
	run -0 gguf-inspect --kv general.architecture "$DATA/tiny.gguf"
	[ "$output" = tiny ]
	run -0 gguf-inspect -k test.u32 "$DATA/tiny.gguf"
	[ "$output" = 4000000000 ]
	run -0 gguf-inspect --kv test.arr.str "$DATA/tiny.gguf"
	[ "$output" = $'a\n\ntab\there\nünï\n<|im_end|>' ]
}

@test "--kv of a missing key fails with 1 and names it" {
	run -1 --separate-stderr gguf-inspect --kv no.such.key "$DATA/tiny.gguf"
	[ "$stderr" = "gguf-inspect: $DATA/tiny.gguf: no key 'no.such.key'" ]
	[ -z "$output" ]
}

@test "--json is one complete document" {
	gguf-inspect --json "$DATA/tiny.gguf" >"$BATS_TEST_TMPDIR/t.json"
	python3 - "$BATS_TEST_TMPDIR/t.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert list(d)[:8] == ["file", "version", "alignment", "kv_count", "tensor_count", "data_offset", "data_size", "file_size"], list(d)
assert d["version"] == 3 and d["alignment"] == 32 and d["file_size"] == 1952
m = d["metadata"]
assert m["test.u64"] == {"type": "uint64", "value": 18000000000000000000}
assert m["test.str"]["value"] == 'héllo "world"\n'
assert m["test.arr.i32"]["count"] == 100 and m["test.arr.i32"]["value"][-1] == 96
assert m["test.arr.str"]["value"][3] == "ünï"
t = d["tensors"][3]
assert t == {"name": "blk.0.q8_0", "type": "Q8_0", "type_id": 8, "n_dims": 2, "shape": [32, 2],
             "elements": 64, "offset": 128, "file_offset": 1760, "bytes": 68}, t
assert d["totals"]["parameters"] == 161 and d["totals"]["by_type"]["F32"]["bytes"] == 48
PY
}

@test "--check passes a clean file" {
	run -0 gguf-inspect --check "$DATA/tiny.gguf"
	[ "${lines[-1]}" = "check ok" ]
}

@test "--check fails with 1 on NaN and Inf and names the tensors" {
	run -1 gguf-inspect --check "$DATA/nan.gguf"
	[[ $output == *"  bad.f32: 1 NaN, 1 Inf"* ]]
	[[ $output == *"  bad.f16: 0 NaN, 1 Inf"* ]]
	[[ $output != *"  good:"* ]]
	[ "${lines[-1]}" = "check failed: 2 problems" ]
}

@test "--stats prints min, max, mean and rms of every tensor" {
	run -0 gguf-inspect --stats "$DATA/tiny.gguf"
	[[ $output == *"  tok_embd.weight: min -1 max 1.75 mean 0.375 rms 0.940966"* ]]
	[[ $output == *"  ids: min 1 max 5 mean 2.8 rms 3.2249"* ]]
	[[ $output == *"  blk.0.q4_0: min "* ]]
}

@test "--check --json adds a check object" {
	run -1 --separate-stderr gguf-inspect --json --stats "$DATA/nan.gguf"
	python3 -c 'import json,sys; c=json.loads(sys.argv[1])["check"]; assert c["problems"] == 2; t=c["tensors"][0]; assert (t["name"], t["nan"], t["inf"], t["min"], t["max"]) == ("bad.f32", 1, 1, 1, 2), t' "$output"
}

@test "--check reads tensor data from stdin too" {
	run -0 gguf-inspect --stats "$DATA/tiny.gguf"
	local want=$(printf '%s\n' "$output" | grep -v '^file size')
	run -0 gguf-inspect --stats - <"$DATA/tiny.gguf"
	[ "$output" = "$want" ]
}

@test "--check finds nonzero padding" {
	cp "$DATA/tiny.gguf" "$BATS_TEST_TMPDIR/p.gguf"
	patch_bytes "$BATS_TEST_TMPDIR/p.gguf" $((1632 + 48 + 3)) 01
	run -1 gguf-inspect --check "$BATS_TEST_TMPDIR/p.gguf"
	[[ $output == *"  tok_embd.weight: nonzero bytes in the padding after it"* ]]
}

@test "truncated input fails with 1 and names the file" {
	head -c 1900 "$DATA/tiny.gguf" >"$BATS_TEST_TMPDIR/cut.gguf"
	run -1 --separate-stderr gguf-inspect "$BATS_TEST_TMPDIR/cut.gguf"
	[ "$stderr" = "gguf-inspect: $BATS_TEST_TMPDIR/cut.gguf: truncated file: data section needs 320 bytes at offset 1632, file has 1900" ]
	head -c 100 "$DATA/tiny.gguf" | { run -1 --separate-stderr gguf-inspect -; [[ $stderr == "gguf-inspect: <stdin>: "*"larger than the file can hold"* ]]; }
}

@test "malformed files fail with a precise message" {
	f=$BATS_TEST_TMPDIR/m.gguf
	cp "$DATA/tiny.gguf" "$f"; patch_bytes "$f" 0 47474a46
	run -1 --separate-stderr gguf-inspect "$f"
	[ "$stderr" = "gguf-inspect: $f: bad magic 47 47 4a 46: not a GGUF file" ]
	cp "$DATA/tiny.gguf" "$f"; patch_bytes "$f" 4 04000000
	run -1 --separate-stderr gguf-inspect "$f"
	[ "$stderr" = "gguf-inspect: $f: unsupported version 4 (only 2 and 3 are read)" ]
	cp "$DATA/tiny.gguf" "$f"	# rename key test.i8 to test.u8
	off=$(python3 -c 'import sys; print(open(sys.argv[1],"rb").read().index(b"test.i8"))' "$f")
	patch_bytes "$f" "$off" "$(printf test.u8 | od -An -tx1 | tr -d ' \n')"
	run -1 --separate-stderr gguf-inspect "$f"
	[ "$stderr" = "gguf-inspect: $f: duplicate key 'test.u8'" ]
	cp "$DATA/tiny.gguf" "$f"	# type of the last tensor 'ids' (I32) -> 99
	off=$(python3 -c 'import sys; b=open(sys.argv[1],"rb").read(); print(b.index(b"ids\x01\x00\x00\x00") + 3 + 4 + 8)' "$f")
	patch_bytes "$f" "$off" 63000000
	run -1 --separate-stderr gguf-inspect "$f"
	[ "$stderr" = "gguf-inspect: $f: tensor 'ids' has unknown type 99" ]
}

@test "a huge tensor table prints without reading the data" {
	# 4 tensors of 4 GiB each in a sparse file
	python3 - "$BATS_TEST_TMPDIR/big.gguf" <<'PY'
import struct, sys
h = b"GGUF" + struct.pack("<IQQ", 3, 4, 0)
for i in range(4):
    name = b"big.%d" % i
    h += struct.pack("<Q", len(name)) + name + struct.pack("<IQQIQ", 2, 65536, 16384, 0, i << 32)
h += b"\0" * (-len(h) % 32)
with open(sys.argv[1], "wb") as f:
    f.write(h)
    f.truncate(len(h) + (4 << 32))
PY
	start=$(date +%s%N)
	run -0 gguf-inspect "$BATS_TEST_TMPDIR/big.gguf"
	[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 1000 ]
	[[ $output =~ big\.3\ +F32\ +65536x16384\ +12884901888\ +4294967296 ]]
	[[ $output == *"  parameters 4294967296"* ]]
}

@test "reads the llama.cpp-written SmolLM2 file" {
	f=$(smollm2)
	run -0 gguf-inspect --kv general.architecture "$f"
	[ "$output" = llama ]
	run -0 gguf-inspect "$f"
	[ "${lines[3]}" = "tensors 272" ]
	[[ $output =~ token_embd\.weight\ +Q8_0\ +576x49152\ +0\ +30081024 ]]
	[[ $output == *"tokenizer.ggml.tokens"*"... 49144 more]"* ]]
	run -0 gguf-inspect --kv tokenizer.ggml.tokens "$f"
	[ "${#lines[@]}" -eq 49152 ]
}

@test "usage errors exit 2" {
	run -2 --separate-stderr gguf-inspect --bogus
	run -2 --separate-stderr gguf-inspect "$DATA/tiny.gguf" "$DATA/tiny.gguf"
	run -2 --separate-stderr gguf-inspect --json --tsv "$DATA/tiny.gguf"
	run -2 --separate-stderr gguf-inspect --kv
	run -2 --separate-stderr gguf-inspect --tsv --check "$DATA/tiny.gguf"
	[[ $stderr == *"usage: gguf-inspect [-cfjst] [-k key] [file | -]"* ]]
}

@test "a missing file fails with 1" {
	run -1 --separate-stderr gguf-inspect "$BATS_TEST_TMPDIR/none.gguf"
	[ "$stderr" = "gguf-inspect: $BATS_TEST_TMPDIR/none.gguf: No such file or directory" ]
}

@test "a write error on stdout fails with 1" {
	[ -w /dev/full ] || skip "no /dev/full"
	run -1 --separate-stderr bash -c 'gguf-inspect "$1" >/dev/full' _ "$DATA/tiny.gguf"
	[ "$stderr" = "gguf-inspect: <stdout>: No space left on device" ]
}

@test "--help prints the usage of the man page" {
	run -0 gguf-inspect --help
	[ "${lines[0]}" = "usage: gguf-inspect [-cfjst] [-k key] [file | -]" ]
	grep -q '^\.Op Fl cfjst$' "$TOP/man/gguf-inspect.1"
	grep -q '^\.Op Fl k Ar key$' "$TOP/man/gguf-inspect.1"
}

@test "--check on a stream that ends inside the data fails with 1" {
	head -c 1900 "$DATA/tiny.gguf" >"$BATS_TEST_TMPDIR/cut.gguf"
	run -1 --separate-stderr gguf-inspect --check - <"$BATS_TEST_TMPDIR/cut.gguf"
	[[ $stderr == "gguf-inspect: <stdin>: truncated file: data ends at offset 1900, "* ]]
}

@test "--stats of the SmolLM2 file is the same from a file and from stdin" {
	f=$(smollm2)
	run -0 gguf-inspect --stats "$f"
	local want=$(printf '%s\n' "$output" | grep -v '^file size')
	[[ $output == *"  output_norm.weight: min -2.125 max 3.34375 mean "* ]]
	run -0 gguf-inspect --stats - <"$f"
	[ "$output" = "$want" ]
}
