#!/usr/bin/env bats
# lib/gguf against real files and llama.cpp's gguf-py: byte-identical round
# trips through the reader and writer (t/tools/gguf-rewrite), and peer checks
# (t/peer/gguf_peer.py) in both directions.
bats_require_minimum_version 1.5.0
setup() {
	load helper
	REWRITE=$TOP/build/t/tools/gguf-rewrite
	PEER=$TOP/t/peer/gguf_peer.py
	[ -x "$REWRITE" ] || skip "build/t/tools/gguf-rewrite not built (make units)"
}

@test "the llama.cpp-written SmolLM2 file round-trips byte for byte" {
	f=$(smollm2)
	run -0 "$REWRITE" "$f" "$BATS_TEST_TMPDIR/copy.gguf"
	cmp "$f" "$BATS_TEST_TMPDIR/copy.gguf"
	run -0 "$REWRITE" -t "$f" "$BATS_TEST_TMPDIR/typed.gguf"
	cmp "$f" "$BATS_TEST_TMPDIR/typed.gguf"
}

@test "a stream round-trips byte for byte too" {
	f=$(smollm2)
	"$REWRITE" - - <"$f" | cmp - "$f"
}

@test "the gguf-py fixtures round-trip byte for byte" {
	for f in tiny align64 nan; do
		"$REWRITE" "$DATA/$f.gguf" "$BATS_TEST_TMPDIR/$f.gguf"
		cmp "$DATA/$f.gguf" "$BATS_TEST_TMPDIR/$f.gguf"
		"$REWRITE" -t "$DATA/$f.gguf" "$BATS_TEST_TMPDIR/$f.t.gguf"
		cmp "$DATA/$f.gguf" "$BATS_TEST_TMPDIR/$f.t.gguf"
	done
}

@test "a v2 file is rewritten as v3 with everything else unchanged" {
	"$REWRITE" "$DATA/v2.gguf" "$BATS_TEST_TMPDIR/v3.gguf"
	cmp "$DATA/tiny.gguf" "$BATS_TEST_TMPDIR/v3.gguf"
}

@test "a failed rewrite leaves no file behind" {
	head -c 1000 "$DATA/tiny.gguf" >"$BATS_TEST_TMPDIR/cut.gguf"
	run -1 --separate-stderr "$REWRITE" "$BATS_TEST_TMPDIR/cut.gguf" "$BATS_TEST_TMPDIR/out.gguf"
	[ ! -e "$BATS_TEST_TMPDIR/out.gguf" ]
	[ -z "$(ls "$BATS_TEST_TMPDIR" | grep tmp)" ]
}

@test "peer: files gguf-py writes load here with the same kvs and tensors" {
	need_py gguf numpy
	python3 "$PEER" fresh "$BATS_TEST_TMPDIR/fresh.gguf"
	run -0 python3 "$PEER" compare "$BATS_TEST_TMPDIR/fresh.gguf"
	run -0 python3 "$PEER" compare "$DATA/tiny.gguf"
	run -0 python3 "$PEER" compare "$DATA/align64.gguf"
}

@test "peer: the SmolLM2 file reads the same here and in gguf-py" {
	need_py gguf numpy
	f=$(smollm2)
	run -0 python3 "$PEER" compare "$f"
	[[ $output == *"33 kvs, 272 tensors agree with gguf-py" ]]
}

@test "peer: files we write load in gguf-py with the same metadata and tensor bytes" {
	need_py gguf numpy
	python3 "$PEER" fresh "$BATS_TEST_TMPDIR/fresh.gguf"
	"$REWRITE" -t "$BATS_TEST_TMPDIR/fresh.gguf" "$BATS_TEST_TMPDIR/ours.gguf"
	run -0 python3 "$PEER" same "$BATS_TEST_TMPDIR/fresh.gguf" "$BATS_TEST_TMPDIR/ours.gguf"
	cmp "$BATS_TEST_TMPDIR/fresh.gguf" "$BATS_TEST_TMPDIR/ours.gguf"
}

@test "peer: --stats agrees with gguf-py's dequantization" {
	need_py gguf numpy
	python3 "$PEER" fresh "$BATS_TEST_TMPDIR/fresh.gguf"
	run -0 python3 "$PEER" stats "$BATS_TEST_TMPDIR/fresh.gguf"
	run -0 python3 "$PEER" stats "$DATA/tiny.gguf"
}
