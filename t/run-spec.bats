bats_require_minimum_version 1.5.0
# run-spec on fixture model A: identity with plain greedy, acceptance as refs.json
setup() { load helper; }

@test "K=1..8 are all identical to plain greedy on model A" {
	d=$(model_a)
	run -0 --separate-stderr run-spec --raw -n 24 -t 2 "$d" "def fibonacci(n):"
	[[ ${lines[0]} =~ ^plain\ [0-9.]+\ tok/s\ \(24\ tokens,\ 1\ prompt\)$ ]]
	for k in 1 2 3 4 5 6 7 8; do
		[[ ${lines[$k]} =~ ^K=$k\ .*acceptance\ [1-9][0-9]*/.*PASS\ \(identical\ to\ plain\)$ ]]
	done
	[ "${lines[9]}" = "SELF-CONSISTENCY PASS" ]
}

@test "acceptance over all 64 prompts (raw, 64 tokens) equals refs.json for K=1..4" {
	d=$(model_a)
	need_py json
	run -0 --separate-stderr spec-accept-all.sh "$d" 1-4
	[[ ${lines[0]} == "plain "*" (4096 tokens, 64 prompts)" ]]
	[ "${lines[5]}" = "SELF-CONSISTENCY PASS" ]
	for k in 1 2 3 4; do
		[[ ${lines[$((5 + k))]} == "K=$k: accepted "*": ok" ]]
	done
}

@test "sampled speculation (temp 0.8) is identical to its seeded rerun" {
	d=$(model_a)
	run -0 --separate-stderr run-spec -K 3 --temp 0.8 --seed 11 -n 24 -t 2 "$d" "Once upon a time"
	[[ ${lines[1]} == "K=3 "*"PASS (identical to a seeded rerun)" ]]
	[ "${lines[2]}" = "SELF-CONSISTENCY PASS" ]
}

@test "an external draft head that cannot be loaded is an error, never a fallback" {
	d=$(model_a)
	run -1 --separate-stderr run-spec -K 1 --draft "$BATS_TEST_TMPDIR/d.gguf" "$d" hi
	[[ $stderr == "run-spec: $BATS_TEST_TMPDIR/d.gguf: "* ]]
	MEMRA_MTP_DRAFT=$BATS_TEST_TMPDIR/e.gguf run -1 --separate-stderr run-spec -K 1 "$d" hi
	[[ $stderr == "run-spec: $BATS_TEST_TMPDIR/e.gguf: "* ]]
	run -1 --separate-stderr run-spec -K 1 "$d+$BATS_TEST_TMPDIR/f.gguf" hi
	[[ $stderr == "run-spec: $BATS_TEST_TMPDIR/f.gguf: "* ]]
	[ -z "$output" ]
}

@test "a model without an MTP head fails with 1" {
	f=$(smollm2)
	run -1 --separate-stderr run-spec -K 1 -n 4 "$f" hi
	[[ $stderr == *"model has no MTP head"* ]]
}

@test "misuse exits 2" {
	run -2 run-spec -K 0 m p
	run -2 run-spec -K 4-2 m p
	run -2 run-spec -K 1-17 m p
	run -2 run-spec -n 0 m p
	run -2 run-spec
}

@test "--help prints the usage that matches the man page SYNOPSIS" {
	run -0 run-spec --help
	[[ ${lines[0]} == "usage: run-spec [--chat | --raw] [--jsonl] [-K K | -K LO-HI]"* ]]
}
