bats_require_minimum_version 1.5.0

setup_file() {
	load helper
	a=$(model_a) || return 0
	export TRUNK="$BATS_FILE_TMPDIR/a-q8.gguf"
	quant-nvfp4 -t 1 --type Q8_0 "$a" "$TRUNK"
}

setup() {
	load helper
	A=$(model_a)
	P=$BATS_TEST_TMPDIR
	MTD=$TOP/tools/make-trimmed-draft/make-trimmed-draft
}

@test "given ranks: a requantized draft (NVFP4 head, d2t and token_embd kept) and the serve commands" {
	printf '5\n8191\n0\n100\n' >"$P/r.txt"
	run -0 --separate-stderr "$MTD" -j 1 -r "$P/r.txt" "$TRUNK" "$P/d.gguf"
	[ "${lines[0]}" = "MEMRA_MODELS=\"m=$TRUNK+$P/d.gguf\" serve" ]
	[ "${lines[1]}" = "MEMRA_MTP_DRAFT=$P/d.gguf run-spec $TRUNK" ]
	# the validation step ran run-spec with the draft attached, K=1..8 identical to plain
	[[ $stderr == *"[mtp-draft] external draft head: blk.8, source=output.weight, head_vocab=4 (trimmed, d2t map)"* ]]
	[[ $stderr == *"K=8 "*"PASS (identical to plain)"* ]]
	[[ $stderr == *"SELF-CONSISTENCY PASS"* ]]
	run -0 gguf-inspect -t "$P/d.gguf"
	printf '%s\n' "${lines[@]}" | grep -q $'^output.weight\tNVFP4\t384,4\t'
	printf '%s\n' "${lines[@]}" | grep -q $'^d2t\tI32\t4\t'
	printf '%s\n' "${lines[@]}" | grep -q $'^blk.8.attn_output.weight\tQ4_K\t'
	# token_embd is the trunk's, byte for byte
	want=$(gguf-inspect -t "$TRUNK" | grep $'^token_embd.weight\t' | cut -f2,3)
	got=$(printf '%s\n' "${lines[@]}" | grep $'^token_embd.weight\t' | cut -f2,3)
	[ "$want" = "$got" ]
}

@test "derived ranks: frspec-owngen runs first and its list is kept beside the draft" {
	head -2 "$A/prompts.jsonl" >"$P/p.jsonl"
	run -0 --separate-stderr "$MTD" -j 2 -n 8 "$TRUNK" "$P/d.gguf" "$P/p.jsonl"
	[[ $stderr == *"deriving 8 ranks from the model's own generations"* ]]
	[[ $stderr == *"top 8 covers "*" own-generated tokens"* ]]
	[ "$(wc -l <"$P/d.ranks.gguf.txt")" = 8 ]
	run -0 gguf-inspect -k frspec.head_vocab "$P/d.gguf"
	[ "$output" = 8 ]
}

@test "-R keeps the trunk's bytes: the draft is trim-head's output" {
	printf '7\n3\n' >"$P/r.txt"
	run -0 "$MTD" -R -r "$P/r.txt" "$TRUNK" "$P/d.gguf"
	trim-head "$TRUNK" "$P/r.txt" "$P/t.gguf"
	cmp "$P/d.gguf" "$P/t.gguf"
}

@test "a failing step stops the script with 1" {
	printf '7\n7\n' >"$P/r.txt"
	run -1 --separate-stderr "$MTD" -r "$P/r.txt" "$TRUNK" "$P/d.gguf"
	[[ $stderr == *"trim-head: $P/r.txt: line 2: id 7 repeats line 1"* ]]
	[[ $stderr == *"make-trimmed-draft: trim-head failed" ]]
	[ ! -e "$P/d.gguf" ]
}

@test "usage" {
	run -0 "$MTD" -h
	[[ ${lines[0]} == "usage: make-trimmed-draft "* ]]
	run -2 "$MTD" "$TRUNK"
	run -2 "$MTD" -n x "$TRUNK" "$P/d.gguf"
}
