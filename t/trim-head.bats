bats_require_minimum_version 1.5.0

# A trunk made from fixture model A (Q8_0 block, Q5_1 head: Q5_K does not
# fit a 384-wide row), the same without its MTP block, and a few ranks.
setup_file() {
	load helper
	a=$(model_a) || return 0
	export TRUNK="$BATS_FILE_TMPDIR/a-q8.gguf" NOMTP="$BATS_FILE_TMPDIR/a-nomtp.gguf"
	quant-nvfp4 -t 1 --type Q8_0 "$a" "$TRUNK"
	quant-nvfp4 -t 1 --type Q8_0 --no-mtp "$a" "$NOMTP"
}

setup() {
	load helper
	model_a >/dev/null
	printf '5\n8191\n0\n100\n13\n' >"$BATS_TEST_TMPDIR/r.txt"
}

# tensor bytes of a GGUF as hex, by name (gguf-py)
py_bytes() {
	python3 -c '
import sys, gguf, numpy as np
r = gguf.GGUFReader(sys.argv[1])
for t in r.tensors:
    if t.name == sys.argv[2]:
        print(np.asarray(t.data).tobytes().hex())
' "$1" "$2"
}

@test "--help matches the man page SYNOPSIS" {
	command -v mandoc >/dev/null || skip "mandoc not installed"
	syn=$(mandoc -Tascii "$TOP/man/trim-head.1" | sed 's/.\x08//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
	    sed '1d;$d' | tr -s ' \n\t' ' ')
	use=$(trim-head --help | sed -n '1s/^usage: //p' | tr -s ' \n\t' ' ')
	[ "$syn" = " $use" ]
}

@test "the draft holds the MTP block, output_norm, token_embd, the gathered head and d2t" {
	run -0 trim-head "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d.gguf"
	run -0 gguf-inspect -t "$BATS_TEST_TMPDIR/d.gguf"
	names=$(printf '%s\n' "${lines[@]}" | cut -f1 | grep -v '^name$' | sort | tr '\n' ' ')
	[ "$names" = "blk.8.attn_k.weight blk.8.attn_k_norm.weight blk.8.attn_norm.weight blk.8.attn_output.weight blk.8.attn_q.weight blk.8.attn_q_norm.weight blk.8.attn_v.weight blk.8.ffn_down.weight blk.8.ffn_gate.weight blk.8.ffn_up.weight blk.8.nextn.eh_proj.weight blk.8.nextn.enorm.weight blk.8.nextn.hnorm.weight blk.8.nextn.shared_head_norm.weight blk.8.post_attention_norm.weight d2t output.weight output_norm.weight token_embd.weight " ]
	run -0 gguf-inspect -k frspec.head_vocab "$BATS_TEST_TMPDIR/d.gguf"
	[ "$output" = 5 ]
	run -0 gguf-inspect -k frspec.trunk "$BATS_TEST_TMPDIR/d.gguf"
	[ "$output" = a-q8.gguf ]
	run -0 gguf-inspect -k frspec.mtp_block "$BATS_TEST_TMPDIR/d.gguf"
	[ "$output" = 8 ]
	run -0 gguf-inspect -k frspec.vocab_size "$BATS_TEST_TMPDIR/d.gguf"
	[ "$output" = 8192 ]
	run -0 gguf-inspect -c "$BATS_TEST_TMPDIR/d.gguf"
}

@test "block tensors are byte-verbatim and head rows are gathered in rank order" {
	need_py gguf numpy
	trim-head "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d.gguf"
	run -0 python3 - "$TRUNK" "$BATS_TEST_TMPDIR/d.gguf" <<'PY'
import sys, gguf, numpy as np
t = {x.name: x for x in gguf.GGUFReader(sys.argv[1]).tensors}
d = {x.name: x for x in gguf.GGUFReader(sys.argv[2]).tensors}
raw = lambda x: np.asarray(x.data).tobytes()
ids = [int(i) for i in d["d2t"].data]
assert ids == [5, 8191, 0, 100, 13], ids
assert d["d2t"].tensor_type == gguf.GGMLQuantizationType.I32
for n in d:
    if n.startswith("blk.") or n in ("token_embd.weight", "output_norm.weight"):
        assert raw(d[n]) == raw(t[n]), n
full = np.asarray(t["output.weight"].data)
head = np.asarray(d["output.weight"].data)
assert head.shape[0] == 5 and d["output.weight"].tensor_type == t["output.weight"].tensor_type
for i, v in enumerate(ids):
    assert head[i].tobytes() == full[v].tobytes(), i
print("ok")
PY
	[ "$output" = ok ]
}

@test "a .gguf rank list gives the same draft as the .txt" {
	trim-head "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d1.gguf"
	trim-head "$TRUNK" "$BATS_TEST_TMPDIR/d1.gguf" "$BATS_TEST_TMPDIR/d2.gguf"	# a draft is a rank list too
	cmp "$BATS_TEST_TMPDIR/d1.gguf" "$BATS_TEST_TMPDIR/d2.gguf"
}

@test "streams: trunk from stdin, draft to stdout" {
	trim-head "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d1.gguf"
	trim-head - "$BATS_TEST_TMPDIR/r.txt" <"$TRUNK" >"$BATS_TEST_TMPDIR/d2.gguf"
	run -0 gguf-inspect -k frspec.trunk "$BATS_TEST_TMPDIR/d2.gguf"
	[ "$output" = "<stdin>" ]
	data() { tail -c +$(($(gguf-inspect "$1" | awk '/^data offset/ { print $3 }') + 1)) "$1"; }
	cmp <(data "$BATS_TEST_TMPDIR/d1.gguf") <(data "$BATS_TEST_TMPDIR/d2.gguf")
}

@test "trim-head | quant-nvfp4 - requantizes the draft (NVFP4 head, Q4_K block)" {
	trim-head "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" |
	    quant-nvfp4 -t 1 --type Q4_K --tensor-type '^output\.weight$=NVFP4' - "$BATS_TEST_TMPDIR/q.gguf"
	run -0 gguf-inspect -t "$BATS_TEST_TMPDIR/q.gguf"
	printf '%s\n' "${lines[@]}" | grep -q $'^output.weight\tNVFP4\t'
	printf '%s\n' "${lines[@]}" | grep -q $'^blk.8.ffn_up.weight\tQ5_0\t'	# Q4_K falls back on 384-wide rows
	run -0 gguf-inspect -k frspec.head_vocab "$BATS_TEST_TMPDIR/q.gguf"
	[ "$output" = 5 ]
	gguf-inspect -t "$BATS_TEST_TMPDIR/q.gguf" | grep $'^d2t\tI32\t' ||
	    skip "quant-nvfp4 re-encodes the I32 d2t (st branch): needs integer tensors kept as they are"
}

@test "gguf-py loads the draft" {
	need_py gguf
	trim-head "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d.gguf"
	run -0 python3 -c 'import sys, gguf; r = gguf.GGUFReader(sys.argv[1]); print(len(r.tensors))' "$BATS_TEST_TMPDIR/d.gguf"
	[ "$output" = 19 ]
}

@test "an id outside the vocabulary fails with 1, names the line and leaves no file" {
	printf '5\n8192\n' >"$BATS_TEST_TMPDIR/bad.txt"
	run -1 --separate-stderr trim-head "$TRUNK" "$BATS_TEST_TMPDIR/bad.txt" "$BATS_TEST_TMPDIR/d.gguf"
	[ "$stderr" = "trim-head: $BATS_TEST_TMPDIR/bad.txt: line 2: id 8192 is outside the vocabulary (8192 tokens)" ]
	[ ! -e "$BATS_TEST_TMPDIR/d.gguf" ]
	[ -z "$(ls "$BATS_TEST_TMPDIR" | grep tmp)" ]
}

@test "a repeated id fails with 1" {
	printf '5\n6\n5\n' >"$BATS_TEST_TMPDIR/dup.txt"
	run -1 --separate-stderr trim-head "$TRUNK" "$BATS_TEST_TMPDIR/dup.txt" "$BATS_TEST_TMPDIR/d.gguf"
	[ "$stderr" = "trim-head: $BATS_TEST_TMPDIR/dup.txt: line 3: id 5 repeats line 1" ]
}

@test "garbage and blank lines fail with 1" {
	printf '5\nabc\n' >"$BATS_TEST_TMPDIR/g.txt"
	run -1 --separate-stderr trim-head "$TRUNK" "$BATS_TEST_TMPDIR/g.txt" "$BATS_TEST_TMPDIR/d.gguf"
	[[ $stderr == *": line 2: not a token id: 'abc'" ]]
	printf '5\n\n6\n' >"$BATS_TEST_TMPDIR/g.txt"
	run -1 --separate-stderr trim-head "$TRUNK" "$BATS_TEST_TMPDIR/g.txt" "$BATS_TEST_TMPDIR/d.gguf"
	[[ $stderr == *": line 2: blank line" ]]
}

@test "ranks derived for another vocabulary fail with 1" {
	trim-head "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d.gguf"
	# the same container, its frspec.vocab_size rewritten to 16384
	python3 -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read())
k = b"frspec.vocab_size"; i = b.index(k) + len(k) + 4
assert int.from_bytes(b[i:i+4], "little") == 8192
b[i:i+4] = (16384).to_bytes(4, "little"); open(sys.argv[2], "wb").write(b)' \
	    "$BATS_TEST_TMPDIR/d.gguf" "$BATS_TEST_TMPDIR/other.gguf"
	run -1 --separate-stderr trim-head "$TRUNK" "$BATS_TEST_TMPDIR/other.gguf" "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "trim-head: $BATS_TEST_TMPDIR/other.gguf: ranks are for a vocabulary of 16384 tokens, the model has 8192" ]
}

@test "--count checks the number of ranks" {
	run -0 trim-head -n 5 "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d.gguf"
	run -1 --separate-stderr trim-head --count 32768 "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d.gguf"
	[ "$stderr" = "trim-head: $BATS_TEST_TMPDIR/r.txt: 5 ranks, --count asks for 32768" ]
	run -2 --separate-stderr trim-head -n 0 "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d.gguf"
}

@test "a trunk without an MTP block fails with 1" {
	run -1 --separate-stderr trim-head "$NOMTP" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d.gguf"
	[ "$stderr" = "trim-head: $NOMTP: no MTP block (qwen35.nextn_predict_layers is absent or 0)" ]
}

@test "misuse exits 2" {
	run -2 --separate-stderr trim-head "$TRUNK"
	run -2 --separate-stderr trim-head --bogus "$TRUNK" "$BATS_TEST_TMPDIR/r.txt"
	run -2 --separate-stderr trim-head - - out.gguf
	run -2 --separate-stderr trim-head a b c d
}

@test "the draft passes the attach check against its trunk, GGUF or HF directory" {
	trim-head "$TRUNK" "$BATS_TEST_TMPDIR/r.txt" "$BATS_TEST_TMPDIR/d.gguf"
	run -0 "$TOP/build/t/tools/draft-check" "$TRUNK" "$BATS_TEST_TMPDIR/d.gguf"
	[ "$output" = "draft fits: blk.8, head_vocab=5" ]
	run -0 "$TOP/build/t/tools/draft-check" "$(model_a)" "$BATS_TEST_TMPDIR/d.gguf"
	run -1 --separate-stderr "$TOP/build/t/tools/draft-check" "$TRUNK" "$TRUNK"
	[ "$stderr" = "draft-check: $TRUNK: no tensor 'd2t'" ]
}
