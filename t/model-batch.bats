bats_require_minimum_version 1.5.0
# model_forward_batch (several sequences decoded together) against
# model_forward one sequence at a time, through build/t/tools/model-batch:
# every decode step's logits and greedy id must be bit-identical.
setup() {
	load helper
	MB=$TOP/build/t/tools/model-batch
	[ -x "$MB" ] || skip "build/t/tools/model-batch not built (make units)"
	# prompts of different lengths that stop after different numbers of tokens
	SEQS="5:1,2,3 9:40,41,42,43,44,45,46 1:7 12:100 3:9,9,9,9,9,9,9,9,9,9,9,9 7:5,17,250"
}

@test "tiny models (GDN, tied head, llama): batched decode is bit-identical to one at a time" {
	for m in q35-r2 q35-r1-tied q35-r4 llama-tiny; do
		for b in 1 3 8; do
			run -0 --separate-stderr "$MB" -t 2 -b "$b" "$DATA/tiny/$m" $SEQS
			want=$((b < 5 ? b : 5))	# the 1-token sequence retires before the first batch
			[ "$output" = "identical: 6 sequences, 37 decode steps, $want at most together" ]
		done
	done
}

# GDN key heads of 80 (gguf-random's tiny-k80): on cuda the padded kernels k_gdn_pad / k_gdn_pad_seqs
k80() {
	"$TOP/build/t/tools/gguf-random" -p tiny-k80 -t Q8_0 "$BATS_TEST_TMPDIR/k80.gguf" &&
	    echo "$BATS_TEST_TMPDIR/k80.gguf"
}

@test "GDN key heads of 80: batched decode is bit-identical to one at a time" {
	f=$(k80) || false
	for b in 1 3 8; do
		run -0 --separate-stderr "$MB" -t 2 -b "$b" "$f" $SEQS
		want=$((b < 5 ? b : 5))
		[ "$output" = "identical: 6 sequences, 37 decode steps, $want at most together" ]
	done
}

# bats test_tags=gpu
@test "GDN key heads of 80 on cuda: batched decode is bit-identical to one at a time" {
	f=$(k80) || false
	for b in 1 3 8; do
		run -0 --separate-stderr "$MB" -d cuda -b "$b" "$f" $SEQS
		want=$((b < 5 ? b : 5))
		[ "$output" = "identical: 6 sequences, 37 decode steps, $want at most together" ]
	done
}

@test "more than 16 sequences together run in one group of up to 32 on the CPU and stay bit-identical" {
	seqs=
	for i in $(seq 1 20); do seqs="$seqs $((4 + i % 5)):$((i * 7)),$((i + 3))"; done
	for m in q35-r2 llama-tiny; do
		run -0 --separate-stderr "$MB" -t 2 -b 20 "$DATA/tiny/$m" $seqs
		[ "$output" = "identical: 20 sequences, 120 decode steps, 20 at most together" ]
		[[ $stderr == *"groups of at most 20 rows (a step holds 32 here)"* ]]
	done
}

@test "model A: 32 sequences decoded together in one group of 32 rows are bit-identical to one at a time" {
	d=$(model_a)
	seqs=
	for i in $(seq 1 32); do seqs="$seqs $((3 + i % 4)):$((i * 37)),$((i + 11)),$((i * 101 % 4000))"; done
	run -0 --separate-stderr "$MB" -t 2 -b 32 "$d" $seqs
	[ "$output" = "identical: 32 sequences, 144 decode steps, 32 at most together" ]
	[[ $stderr == *"groups of at most 32 rows (a step holds 32 here)"* ]]
	# past 32 the rows are cut into groups of 32 at most, each row's bits the same
	run -0 --separate-stderr "$MB" -t 2 -b 36 "$d" $seqs $seqs
	[ "$output" = "identical: 64 sequences, 288 decode steps, 36 at most together" ]
	[[ $stderr == *"groups of at most 32 rows (a step holds 32 here)"* ]]
}

@test "model A (HF, and Q4_K, NVFP4 GGUFs of it): batched decode is bit-identical, slots refilled" {
	d=$(model_a)
	seqs="6:970,11,1879,374 3:264,1273,13,576,3974,1387,3883 1:42 8:3420,916 4:279,1567,556,11,12"
	run -0 --separate-stderr "$MB" -t 2 -b 1 "$d" $seqs
	[ "$output" = "identical: 5 sequences, 22 decode steps, 1 at most together" ]
	run -0 --separate-stderr "$MB" -t 2 -b 4 "$d" $seqs
	[ "$output" = "identical: 5 sequences, 22 decode steps, 4 at most together" ]
	for ty in Q4_K NVFP4; do
		quant-nvfp4 -t 2 --type $ty "$d" "$BATS_TEST_TMPDIR/a.gguf" 2>/dev/null
		run -0 --separate-stderr "$MB" -t 2 -b 3 "$BATS_TEST_TMPDIR/a.gguf" $seqs
		[ "$output" = "identical: 5 sequences, 22 decode steps, 3 at most together" ]
		run -0 --separate-stderr "$MB" -t 1 -b 5 -d cpu:scalar "$BATS_TEST_TMPDIR/a.gguf" $seqs
		[ "$output" = "identical: 5 sequences, 22 decode steps, 4 at most together" ]
	done
}
