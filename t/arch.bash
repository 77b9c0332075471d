# Shared by the architecture bats files (moe, gemma4, step35; load arch): the checks every
# tiny transformers fixture passes.  Each file's setup calls arch_setup; fixtures hold
# refs.json from tools/make-*-models.py.

# arch_setup DIR MODEL...: the test tools ML, MG, MB (build/t/tools; a skip when not built),
# M=$DATA/DIR, MODELS and IDS (the 16 prompt ids the references were made for)
arch_setup() {
	ML=$TOP/build/t/tools/model-logits
	MG=$TOP/build/t/tools/model-greedy
	MB=$TOP/build/t/tools/model-batch
	[ -x "$ML" ] && [ -x "$MG" ] && [ -x "$MB" ] || skip "build/t/tools not built (make units)"
	M=$DATA/$1
	shift
	MODELS="$*"
	IDS="5 17 250 3 99 99 99 42 7 1 0 310 64 64 128 9"
}

# refs_greedy DIR: the greedy continuation transformers gave (refs.json), space-separated
refs_greedy() {
	python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["greedy"]["new_ids"])))' "$1/refs.json"
}

# steps_agree MODEL: token-by-token logits within 1e-5 relative of the prefill's, every row
steps_agree() {
	"$ML" -t 2 "$1" "$BATS_TEST_TMPDIR/p" $IDS
	"$ML" -t 2 -1 "$1" "$BATS_TEST_TMPDIR/d" $IDS
	run -0 python3 -c 'import numpy as np,sys; a,b=(np.fromfile(f,dtype=np.float32).reshape(16,-1) for f in sys.argv[1:]); assert (np.abs(a-b).max(axis=1)/np.abs(a).max(axis=1)).max() <= 1e-5' "$BATS_TEST_TMPDIR/p" "$BATS_TEST_TMPDIR/d"
}

# steps_dpos_same MODEL [DEVICE]: decode (-p 4) and verify (-v 4 and -v 3, rolled back) logits
# of steps whose layers read their positions from backend memory (recordable, model-logits -s
# counts them) equal those at the host's positions (MEMRA_HOST_POS=1, none counted) bit for bit
steps_dpos_same() {
	local mode d=${2:-cpu}

	for mode in "-p 4" "-p 2 -v 4" "-p 5 -v 3"; do
		run -0 --separate-stderr "$ML" -s -t 2 -d "$d" $mode "$1" "$BATS_TEST_TMPDIR/dev" $IDS
		[[ $stderr =~ "steps at backend positions: "[1-9] ]]
		MEMRA_HOST_POS=1 run -0 --separate-stderr "$ML" -s -t 2 -d "$d" $mode "$1" \
		    "$BATS_TEST_TMPDIR/host" $IDS
		[ "$stderr" = "steps at backend positions: 0" ]
		cmp "$BATS_TEST_TMPDIR/dev" "$BATS_TEST_TMPDIR/host"
	done
}

# batch_identical MODEL: six sequences decoded in batches of 1, 3 and 8 give each one's
# bits alone
batch_identical() {
	local seqs="5:1,2,3 9:40,41,42,43,44,45,46 1:7 12:100 3:9,9,9,9,9,9,9,9,9,9,9,9 7:5,17,250"

	for b in 1 3 8; do
		run -0 --separate-stderr "$MB" -t 2 -b "$b" "$1" $seqs
		[[ $output == "identical: 6 sequences, 37 decode steps, "* ]]
	done
}

# cuda_same MODEL...: on the CUDA backend, run-gen's greedy ids equal the CPU's on three
# prompts (the last of 32 ids: more than 16 rows, so the prefill products and, where a
# window slides, its attention take their prompt paths) with every argmax gate MATCH, and
# batched decode bit-identical to one sequence at a time (bats test_tags=gpu)
cuda_same() {
	local p='{"prompt": "hello world"}
{"prompt": "the cat sat on the mat and then it sat on the hat"}
{"prompt": [5, 17, 250, 3, 99, 99, 99, 42, 7, 1, 0, 310, 64, 64, 128, 9, 5, 17, 250, 3, 99, 42, 7, 1, 11, 12, 13, 14, 15, 16, 17, 18]}'
	local seqs="5:1,2,3 9:40,41,42,43,44,45,46 1:7 12:100 3:9,9,9,9,9,9,9,9,9,9,9,9 7:5,17,250"
	local m want

	# the kernels of these architectures run on a GPU only when asked (lib/model.c)
	export MEMRA_CUDA_UNVERIFIED=1
	for m in "$@"; do
		run -0 --separate-stderr run-gen --raw --ids --jsonl -n 24 --device cpu "$m" <<<"$p"
		want=$(sed 's/.*"ids": \[\([^]]*\)\].*/\1/' <<<"$output")
		run -0 --separate-stderr run-gen --raw --ids --jsonl -n 24 --device cuda "$m" <<<"$p"
		[ "$(sed 's/.*"ids": \[\([^]]*\)\].*/\1/' <<<"$output")" = "$want" ]
		[ "$(grep -c '"gate": "MATCH"' <<<"$output")" = 3 ]
		for b in 1 3 8; do
			run -0 --separate-stderr "$MB" -d cuda -b "$b" "$m" $seqs
			[[ $output == "identical: 6 sequences, 37 decode steps, "* ]]
		done
	done
}
