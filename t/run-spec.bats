bats_require_minimum_version 1.5.0
# run-spec on fixture model A: identity with plain greedy, acceptance as refs.json
setup() { load helper; }

# For the attach tests: a Q8_0 GGUF of A, ranks from A's own greedy
# continuation of prompt 0 (so drafts get accepted), and trim-head's draft.
setup_file() {
	load helper
	a=$(model_a) || return 0
	export TRUNK="$BATS_FILE_TMPDIR/a-q8.gguf" RANKS="$BATS_FILE_TMPDIR/r.gguf.txt"
	export DRAFT="$BATS_FILE_TMPDIR/d.gguf"
	quant-nvfp4 -t 1 --type Q8_0 "$a" "$TRUNK"
	head -1 "$a/prompts.jsonl" >"$BATS_FILE_TMPDIR/p.jsonl"
	frspec-owngen -t 2 --raw --ngen 32 "$a" "$BATS_FILE_TMPDIR/r.gguf" 256 \
	    "$BATS_FILE_TMPDIR/p.jsonl" 2>/dev/null
	trim-head "$TRUNK" "$RANKS" "$DRAFT"
}

# run-spec K=1-3 on $1 is identical to plain; stderr must hold the line $2
spec_passes_with() {
	run -0 --separate-stderr run-spec --raw -K 1-3 -n 24 -t 2 "$1" "def fibonacci(n):"
	for k in 1 2 3; do
		[[ ${lines[$k]} == "K=$k "*" acceptance "*"PASS (identical to plain)" ]]
	done
	[ "${lines[4]}" = "SELF-CONSISTENCY PASS" ]
	[[ $'\n'"$stderr"$'\n' == *$'\n'"$2"$'\n'* ]]
}

@test "K=1..8 are all identical to plain greedy on model A" {
	d=$(model_a)
	run -0 --separate-stderr run-spec --raw -n 24 -t 2 "$d" "def fibonacci(n):"
	[[ ${lines[0]} =~ ^plain\ [0-9.]+\ tok/s\ \(24\ tokens,\ 1\ prompt\)$ ]]
	for k in 1 2 3 4 5 6 7 8; do
		[[ ${lines[$k]} =~ ^K=$k\ .*acceptance\ [1-9][0-9]*/.*PASS\ \(identical\ to\ plain\)$ ]]
	done
	[ "${lines[9]}" = "SELF-CONSISTENCY PASS" ]
}

@test "MEMRA_CUDA_MTP_CHAIN=0 drafts step by step: the same drafts (acceptance by depth) and PASS at K=1..8, full and masked head" {
	d=$(model_a)
	for c in 0 1; do
		MEMRA_CUDA_MTP_CHAIN=$c run -0 --separate-stderr run-spec --raw -n 64 -t 2 "$d" \
		    "def fibonacci(n):"
		for k in 1 2 3 4 5 6 7 8; do
			[[ ${lines[$k]} =~ ^K=$k\ .*acceptance\ [1-9][0-9]*/.*PASS\ \(identical\ to\ plain\)$ ]]
		done
		printf '%s\n' "${lines[@]}" | sed 's/^\(K=[0-9]*\|plain\) [0-9.]* tok\/s\( [0-9.]*x\)\{0,1\}/\1/' \
		    >"$BATS_TEST_TMPDIR/c$c"
	done
	grep -q '^K=8 acceptance .* by depth ' "$BATS_TEST_TMPDIR/c1"
	cmp "$BATS_TEST_TMPDIR/c0" "$BATS_TEST_TMPDIR/c1"
	for c in 0 1; do	# a masked head's chain: ranks_argmax's picks
		MEMRA_CUDA_MTP_CHAIN=$c MEMRA_FRSPEC_TRIM=$RANKS run -0 --separate-stderr \
		    run-spec --raw -K 1-4 -n 32 -t 2 "$TRUNK" "def fibonacci(n):"
		for k in 1 2 3 4; do
			[[ ${lines[$k]} =~ ^K=$k\ .*acceptance\ [1-9][0-9]*/.*PASS\ \(identical\ to\ plain\)$ ]]
		done
		printf '%s\n' "${lines[@]}" | sed 's/^\(K=[0-9]*\|plain\) [0-9.]* tok\/s\( [0-9.]*x\)\{0,1\}/\1/' \
		    >"$BATS_TEST_TMPDIR/m$c"
	done
	cmp "$BATS_TEST_TMPDIR/m0" "$BATS_TEST_TMPDIR/m1"
	MEMRA_CUDA_MTP_CHAIN=2 run -2 --separate-stderr run-spec -K 1 "$d" hi
	[ "$stderr" = "run-spec: MEMRA_CUDA_MTP_CHAIN: '2': not 0 or 1" ]
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
	[[ ${stderr_lines[1]} == "run-spec: $BATS_TEST_TMPDIR/d.gguf: "* ]]
	MEMRA_MTP_DRAFT=$BATS_TEST_TMPDIR/e.gguf run -1 --separate-stderr run-spec -K 1 "$d" hi
	[[ ${stderr_lines[1]} == "run-spec: $BATS_TEST_TMPDIR/e.gguf: "* ]]
	run -1 --separate-stderr run-spec -K 1 "$d+$BATS_TEST_TMPDIR/f.gguf" hi
	[[ ${stderr_lines[1]} == "run-spec: $BATS_TEST_TMPDIR/f.gguf: "* ]]
	[ -z "$output" ]
}

@test "MODEL+draft.gguf: the external masked draft drafts, output identical to plain" {
	spec_passes_with "$TRUNK+$DRAFT" "[mtp-draft] external draft head: blk.8, source=output.weight, head_vocab=256 (trimmed, d2t map)"
	[ "${stderr_lines[0]}" = "[mtp-draft] loading external MTP draft: $DRAFT" ]
}

@test "a trunk without an MTP block drafts with the external draft's block" {
	quant-nvfp4 -t 1 --type Q8_0 --no-mtp "$(model_a)" "$BATS_TEST_TMPDIR/nomtp.gguf"
	run -1 --separate-stderr run-spec -K 1 -n 4 "$BATS_TEST_TMPDIR/nomtp.gguf" hi
	spec_passes_with "$BATS_TEST_TMPDIR/nomtp.gguf+$DRAFT" "[mtp-draft] external draft head: blk.8, source=output.weight, head_vocab=256 (trimmed, d2t map)"
}

@test "MEMRA_MTP_DRAFT and --draft attach the same draft (the flag wins)" {
	MEMRA_MTP_DRAFT=$DRAFT spec_passes_with "$TRUNK" "[mtp-draft] loading external MTP draft: $DRAFT"
	MEMRA_MTP_DRAFT=/nonexistent run -0 --separate-stderr run-spec --draft "$DRAFT" -K 2 -n 8 "$TRUNK" hi
	[ "${stderr_lines[0]}" = "[mtp-draft] loading external MTP draft: $DRAFT" ]
}

@test "MEMRA_FRSPEC_TRIM self-trims a GGUF trunk's head, output identical to plain" {
	MEMRA_FRSPEC_TRIM=$RANKS spec_passes_with "$TRUNK" "[frspec-trim] self-trimmed head: 256 rows of main output.weight (Q5_1)"
}

@test "MEMRA_FRSPEC_TRIM self-trims an HF checkpoint's head, output identical to plain" {
	MEMRA_FRSPEC_TRIM=$RANKS spec_passes_with "$(model_a)" "[frspec-trim] self-trimmed head: 256 rows of main output.weight (BF16)"
}

@test "a rank list with a draft that is trimmed already is an error, never ignored" {
	MEMRA_FRSPEC_TRIM=$RANKS run -1 --separate-stderr run-spec -K 1 -n 4 "$TRUNK+$DRAFT" hi
	[ "${stderr_lines[-1]}" = "run-spec: $TRUNK: frspec trim: the draft's heads are trimmed already (its d2t): give the rank list or the trimmed draft, not both" ]
	[ -z "$output" ]
}

@test "MEMRA_FULL_PREC=1 disables the trim" {
	MEMRA_FULL_PREC=1 MEMRA_FRSPEC_TRIM=$RANKS run -0 --separate-stderr run-spec -K 2 -n 8 "$TRUNK" hi
	[[ $stderr != *"[frspec-trim]"* ]]
	[[ ${lines[1]} == "K=2 "*"PASS (identical to plain)" ]]
}

@test "a missing or malformed rank list is an error, never a fallback" {
	MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/no.txt run -1 --separate-stderr run-spec -K 1 -n 4 "$TRUNK" hi
	[ "$stderr" = "run-spec: $TRUNK: frspec trim: $BATS_TEST_TMPDIR/no.txt: No such file or directory" ]
	printf '1\n9000\n' >"$BATS_TEST_TMPDIR/r.txt"
	MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/r.txt run -1 --separate-stderr run-spec -K 1 -n 4 "$TRUNK" hi
	[ "$stderr" = "run-spec: $TRUNK: frspec trim: $BATS_TEST_TMPDIR/r.txt: line 2: id 9000 is outside the vocabulary (8192 tokens)" ]
	[ -z "$output" ]
}

# $DRAFT with one metadata value or tensor name rewritten (same length)
draft_patched() {
	python3 -c '
import sys
b = open(sys.argv[1], "rb").read()
if sys.argv[2] == "blk":
    b = b.replace(b"blk.8.", b"blk.7.")
else:
    k = sys.argv[2].encode(); i = b.index(k) + len(k) + 4
    b = b[:i] + int(sys.argv[3]).to_bytes(4, "little") + b[i + 4:]
open(sys.argv[4], "wb").write(b)' "$DRAFT" "$1" "${2:-0}" "$3"
}

@test "a draft for another vocabulary, hidden size or block index is an error" {
	P=$BATS_TEST_TMPDIR
	draft_patched frspec.vocab_size 16384 "$P/voc.gguf"
	run -1 --separate-stderr run-spec -K 1 -n 4 "$TRUNK+$P/voc.gguf" hi
	[ "${stderr_lines[1]}" = "run-spec: $P/voc.gguf: ranks are for a vocabulary of 16384 tokens, the model has 8192" ]
	draft_patched qwen35.embedding_length 512 "$P/emb.gguf"
	run -1 --separate-stderr run-spec -K 1 -n 4 "$TRUNK+$P/emb.gguf" hi
	[ "${stderr_lines[1]}" = "run-spec: $P/emb.gguf: draft hidden size (qwen35.embedding_length) is not the trunk's 384" ]
	draft_patched blk 0 "$P/blk.gguf"
	run -1 --separate-stderr run-spec -K 1 -n 4 "$TRUNK+$P/blk.gguf" hi
	[ "${stderr_lines[1]}" = "run-spec: $P/blk.gguf: draft has no MTP block blk.8 (tensor 'blk.8.nextn.eh_proj.weight')" ]
	[ -z "$output" ]
}

# --- token-id prompts, models without a tokenizer, --ignore-eos ---

# a_dir DIR: model A's files linked into DIR, the tokenizer's left out when $2 is "notok"
a_dir() {
	mkdir "$1"
	for f in "$(model_a)"/*; do
		[ "${2:-}" = notok ] && [[ ${f##*/} == tokenizer* ]] && continue
		ln -s "$f" "$1/"
	done
}

# the report without its speeds
no_speed() { sed -E 's/[0-9.]+ tok\/s( [0-9.]+x)?/S/'; }

@test "--jsonl {\"prompt\": [ids]}: the ids --tokenize gives run as the --raw text does, on A and on A without its tokenizer" {
	d=$(model_a)
	run -0 --separate-stderr run-spec --raw -K 1-3 -n 24 -t 2 "$d" "def fibonacci(n):"
	want=$(no_speed <<<"$output")
	[[ $want == *"SELF-CONSISTENCY PASS" ]]
	ids=$(run-gen --tokenize --special "$d" "def fibonacci(n):" | paste -sd, -)
	echo "{\"prompt\": [$ids]}" >"$BATS_TEST_TMPDIR/in"
	run -0 --separate-stderr run-spec --jsonl -K 1-3 -n 24 -t 2 "$d" <"$BATS_TEST_TMPDIR/in"
	[ "$(no_speed <<<"$output")" = "$want" ]
	a_dir "$BATS_TEST_TMPDIR/m" notok
	run -0 --separate-stderr run-spec --jsonl -K 1-3 -n 24 -t 2 "$BATS_TEST_TMPDIR/m" <"$BATS_TEST_TMPDIR/in"
	[ "$(no_speed <<<"$output")" = "$want" ]
}

@test "a model without a tokenizer refuses a text prompt with 1, as an operand or a request" {
	a_dir "$BATS_TEST_TMPDIR/m" notok
	run -1 --separate-stderr run-spec -K 1 -n 4 -t 2 "$BATS_TEST_TMPDIR/m" "hi"
	[ "$stderr" = "run-spec: $BATS_TEST_TMPDIR/m: no tokenizer: give prompts as token ids (--jsonl {\"prompt\": [ids]})" ]
	printf '%s\n' '{"prompt": [1, 2]}' '{"prompt": "hi"}' >"$BATS_TEST_TMPDIR/in"
	run -1 --separate-stderr run-spec --jsonl -K 1 -n 4 -t 2 "$BATS_TEST_TMPDIR/m" <"$BATS_TEST_TMPDIR/in"
	[ "$stderr" = "run-spec: stdin: line 2: $BATS_TEST_TMPDIR/m: no tokenizer: give the prompt as token ids" ]
	[ -z "$output" ]
}

@test "bad id prompts fail with 1 and a one-line reason naming the line" {
	d=$(model_a)
	for bad in '[1, 8192]:"prompt"[1]: id 8192 is outside the vocabulary (8192 tokens)' \
	    '[-3]:"prompt"[0]: id -3 is outside the vocabulary (8192 tokens)' \
	    '[2, 0.5]:"prompt"[1]: 0.5 is not an integer token id' \
	    '[true]:"prompt"[0]: true is not an integer token id' \
	    '[]:"prompt": an empty array of token ids'; do
		printf '%s\n' '{"prompt": [1, 2]}' '' "{\"prompt\": ${bad%%:*}}" >"$BATS_TEST_TMPDIR/in"
		run -1 --separate-stderr run-spec --jsonl -K 1 -n 4 -t 2 "$d" <"$BATS_TEST_TMPDIR/in"
		[ "$stderr" = "run-spec: stdin: line 3: ${bad#*:}" ]
		[ -z "$output" ]
	done
	echo '{"prompt": [1], "ignore_eos": 0}' >"$BATS_TEST_TMPDIR/in"
	run -1 --separate-stderr run-spec --jsonl -K 1 -n 4 -t 2 "$d" <"$BATS_TEST_TMPDIR/in"
	[ "$stderr" = 'run-spec: stdin: line 1: "ignore_eos": not true or false' ]
}

@test "--ignore-eos and \"ignore_eos\": true: exactly -n tokens past a stop token, still identical to plain" {
	d=$(model_a)
	run -0 --separate-stderr run-gen --raw --ids -n 24 -t 2 "$d" "def fibonacci(n):"
	read -r -a g <<<"$output"
	a_dir "$BATS_TEST_TMPDIR/m"
	printf '{"eos_token_id": %s}\n' "${g[3]}" >"$BATS_TEST_TMPDIR/m/generation_config.json"
	stop=0
	while [ "${g[$stop]}" != "${g[3]}" ]; do stop=$((stop + 1)); done
	run -0 --separate-stderr run-spec --raw -K 1-2 -n 24 -t 2 "$BATS_TEST_TMPDIR/m" "def fibonacci(n):"
	[[ ${lines[0]} == "plain "*" ($stop tokens, 1 prompt)" ]]
	run -0 --separate-stderr run-spec --raw --ignore-eos -K 1-2 -n 24 -t 2 "$BATS_TEST_TMPDIR/m" "def fibonacci(n):"
	[[ ${lines[0]} == "plain "*" (24 tokens, 1 prompt)" ]]
	[[ ${lines[1]} == "K=1 "*"PASS (identical to plain)" ]]
	[[ ${lines[2]} == "K=2 "*"PASS (identical to plain)" ]]
	ids=$(run-gen --tokenize --special "$d" "def fibonacci(n):" | paste -sd, -)
	printf '%s\n' "{\"prompt\": [$ids], \"ignore_eos\": true}" "{\"prompt\": [$ids]}" >"$BATS_TEST_TMPDIR/in"
	run -0 --separate-stderr run-spec --jsonl -K 1-2 -n 24 -t 2 "$BATS_TEST_TMPDIR/m" <"$BATS_TEST_TMPDIR/in"
	[[ ${lines[0]} == "plain "*" ($((24 + stop)) tokens, 2 prompts)" ]]
	[ "${lines[3]}" = "SELF-CONSISTENCY PASS" ]
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
	[[ ${lines[0]} == "usage: run-spec [--chat | --raw] [--jsonl] [-K K | -K LO-HI] [-n N] [--ignore-eos]" ]]
	[[ ${lines[5]} == "       run-spec --trace-in FILE [--trace-arm both|plain|replay] [--trace-out FILE]" ]]
	command -v mandoc >/dev/null || skip "mandoc not installed"
	# the same options in the same order as the SYNOPSIS (case and spacing aside)
	syn=$(mandoc -Tascii "$TOP/man/run-spec.1" | sed 's/.\x08//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
	    sed '1d;$d' | tr -d ' \n\t' | tr A-Z a-z)
	use=$(run-spec --help | sed -n '1,/^  -/p' | sed '$d; 1s/^usage: //' | tr -d ' \n\t' | tr A-Z a-z)
	[ "$syn" = "$use" ]
}

# --- acceptance traces: --trace-out records, --trace-in replays ---

# record FILE K-RANGE N PROMPTS: A's trace of its first PROMPTS prompts, raw, N tokens each
record() {
	head -"$4" "$(model_a)/prompts.jsonl" >"$BATS_TEST_TMPDIR/p.jsonl"
	run -0 --separate-stderr run-spec --raw --jsonl --ignore-eos -K "$2" -n "$3" -t 2 \
	    --trace-out "$1" "$(model_a)" <"$BATS_TEST_TMPDIR/p.jsonl"
}

# field ROW N: the Nth tab-separated field of ROW
field() { cut -f"$2" <<<"$1"; }

@test "a trace of A replayed on A: the same rounds, acceptance and tokens, and the same trace again" {
	d=$(model_a)
	T=$BATS_TEST_TMPDIR
	record "$T/a.jsonl" 1-3 24 3
	rec=("${lines[@]}")
	[ "${rec[4]}" = "SELF-CONSISTENCY PASS" ]
	[ -z "$(find "$T" -name '*.tmp.*')" ]	# no temporary left
	[ "$(grep -c '"memra_spec_trace": 1' "$T/a.jsonl")" -eq 3 ]
	run -0 --separate-stderr run-spec -t 2 --trace-in "$T/a.jsonl" --trace-out "$T/b.jsonl" "$d"
	[ "${lines[0]}" = "$(printf 'arm\tK\ttok_s\ttokens\tsecs\tprompts\trounds\tdrafted\taccepted\tmean_len\tagree\tsame\tspeedup')" ]
	[ "${#lines[@]}" -eq 7 ]
	cmp "$T/a.jsonl" "$T/b.jsonl"	# every round's drafts and acceptance, every token
	for k in 1 2 3; do
		p=${lines[$((2 * k - 1))]} r=${lines[$((2 * k))]}
		[[ $p == "plain	$k	"*"	72	"*"	3	-	-	-	-	-	-	-" ]]
		[ "$(field "$r" 1-2)" = "replay	$k" ]
		[ "$(field "$r" 4)" = 72 ]
		# accepted/drafted and the tokens a round as the recording's K line says
		[[ ${rec[$k]} == *" acceptance $(field "$r" 9)/$(field "$r" 8) = "* ]]
		[[ ${rec[$k]} == *" mean accepted length $(printf '%.2f' "$(field "$r" 10)") by "* ]]
		a=$(field "$r" 11)
		[ "${a%/*}" = "${a#*/}" ]	# the judge kept what the trace says, every round
		[ "$(field "$r" 12)" = 3/3 ]
		[[ $(field "$r" 13) =~ ^[0-9]+\.[0-9]{3}$ ]]
	done
	[ "${stderr_lines[0]}" = "[trace] K=1: 3 prompts recorded with the mtp drafter on $d, replayed with the mtp drafter on their own ids" ]
}

@test "a trace replays on models of another vocabulary and drafter: the trace's rounds on fixed ids" {
	T=$BATS_TEST_TMPDIR
	record "$T/a.jsonl" 2-3 16 2
	for m in "$DATA/moe/moe-e8k2-mtp:mtp" "$DATA/step35/step-n:nextn"; do
		run -0 --separate-stderr run-spec -t 2 --trace-in "$T/a.jsonl" --trace-out "$T/c.jsonl" "${m%:*}"
		[ "${#lines[@]}" -eq 5 ]
		[ "$(field "${lines[2]}" 1-2)" = "replay	2" ]
		[ "$(field "${lines[2]}" 12)" = - ]
		[ "${stderr_lines[0]}" = "[trace] K=2: 2 prompts recorded with the mtp drafter on $(model_a), replayed with the ${m#*:} drafter on fixed ids (the model's vocabulary of 320 tokens is not the trace's 8192)" ]
		python3 - "$T/a.jsonl" "$T/c.jsonl" "${m#*:}" <<-'EOF'
		import json, sys
		a = [json.loads(l) for l in open(sys.argv[1])]
		c = [json.loads(l) for l in open(sys.argv[2])]
		assert len(a) == len(c) == 6
		for x, y in zip(a, c):
		    if "memra_spec_trace" in x:
		        assert [y[f] for f in ("K", "n", "prompts", "n_vocab", "drafter")] == \
		            [x["K"], x["n"], x["prompts"], 320, sys.argv[3]]
		        continue
		    assert (y["rounds"], y["tokens"], len(y["ids"])) == (x["rounds"], x["tokens"], len(x["ids"]))
		    assert y["ids"] != x["ids"] and all(0 <= i < 320 for i in y["ids"] + y["out"])
		EOF
	done
}

@test "--trace-arm plain and replay run one arm, -K one section" {
	d=$(model_a)
	record "$BATS_TEST_TMPDIR/a.jsonl" 1-2 8 1
	run -0 --separate-stderr run-spec -t 2 --trace-in "$BATS_TEST_TMPDIR/a.jsonl" --trace-arm plain -K 2 "$d"
	[ "${#lines[@]}" -eq 2 ]
	[[ ${lines[1]} == "plain	2	"*"	8	"* ]]
	run -0 --separate-stderr run-spec -t 2 --trace-in "$BATS_TEST_TMPDIR/a.jsonl" --trace-arm replay "$d"
	[ "${#lines[@]}" -eq 3 ]
	[[ ${lines[1]} == "replay	1	"*"	1/1	-" ]]
	[[ ${lines[2]} == "replay	2	"*"	1/1	-" ]]
}

@test "a malformed or missing trace fails with 1 and a one-line reason naming the line" {
	d=$(model_a)
	T=$BATS_TEST_TMPDIR
	h='{"memra_spec_trace": 1, "K": 2, "drafter": "mtp", "model": "A", "n_vocab": 8192, "n": 8, "temp": 0, "prompts": 1}'
	for bad in "$h|{\"prompt\": 0, \"ids\": [1], \"rounds\": [[2, 3]], \"tokens\": 1, \"out\": [1]}|line 2: \"rounds\"[0]: 3 accepted of 2 drafts" \
	    "$h|{\"prompt\": 0, \"ids\": [1, 9000]}|line 2: \"ids\"[1]: id 9000 is outside the vocabulary (8192 tokens)" \
	    "$h|{\"prompt\": 0, \"ids\": [1], \"rounds\": [], \"tokens\": 1, \"out\": [1]|line 2: column 64: expected ',' or '}'" \
	    "$h||line 3 (end of file): K=2's section (line 1) has 0 of its 1 prompts" \
	    "{\"prompt\": 0}||line 1: not a trace header ({\"memra_spec_trace\": 1, ...})"; do
		IFS='|' read -r l1 l2 why <<<"$bad"
		printf '%s\n%s\n' "$l1" "$l2" >"$T/bad.jsonl"
		run -1 --separate-stderr run-spec --trace-in "$T/bad.jsonl" "$d"
		[ "$stderr" = "run-spec: $T/bad.jsonl: $why" ]
		[ -z "$output" ]
	done
	run -1 --separate-stderr run-spec --trace-in "$T/none.jsonl" "$d"
	[ "$stderr" = "run-spec: $T/none.jsonl: No such file or directory" ]
}

@test "a trace deeper than the DFlash drafter drafts is refused with 2; within its block it replays" {
	d=$(model_a)
	T=$BATS_TEST_TMPDIR
	record "$T/a.jsonl" 3 8 1
	printf '%s\n' '{"memra_spec_trace": 1, "K": 8, "drafter": "mtp", "model": "A", "n_vocab": 8192, "n": 10, "temp": 0, "prompts": 1}' \
	    '{"prompt": 0, "ids": [1, 2], "rounds": [[8, 8]], "tokens": 10, "out": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}' >>"$T/a.jsonl"
	export MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT=$DATA/dflash/d2
	run -2 --separate-stderr run-spec -t 2 --trace-in "$T/a.jsonl" "$d"
	[ "${stderr_lines[-1]}" = "run-spec: $T/a.jsonl: K=8: the DFlash drafter drafts at most 7 tokens a round (its block of 8)" ]
	[ -z "$output" ]
	run -0 --separate-stderr run-spec -t 2 --trace-in "$T/a.jsonl" -K 3 "$d"
	[[ ${lines[2]} == "replay	3	"*"	8	"* ]]
	[[ $stderr == *"[trace] K=3: 1 prompt recorded with the mtp drafter on $d, replayed with the dflash2 drafter on their own ids"* ]]
}

# --- synthetic traces (build/t/tools/spec-trace-synth) ---

# synth ARGS...: spec-trace-synth, or skip when t/tools are not built
synth() {
	[ -x "$TOP/build/t/tools/spec-trace-synth" ] || skip "build/t/tools not built (make units)"
	"$TOP/build/t/tools/spec-trace-synth" "$@"
}

@test "spec-trace-synth: rounds that keep n tokens, k drafts or what n leaves, L tokens a round on average, by seed" {
	T=$BATS_TEST_TMPDIR
	for L in 1 3 4 5.5 6 16; do
		run -0 --separate-stderr synth -K 15 -L $L -p 40 -l 5,17,9 -n 300 -V 1000 -s 7 "$T/l$L.jsonl"
		[ -z "$output" ]
		[[ $stderr == "spec-trace-synth: K=15 L=$L: acceptance by depth "*" rounds with drafts "* ]]
		python3 - "$T/l$L.jsonl" "$L" <<-'EOF'
		import json, sys
		t = [json.loads(l) for l in open(sys.argv[1])]
		h, L = t[0], float(sys.argv[2])
		assert (h["K"], h["drafter"], h["n_vocab"], h["n"], h["temp"], h["prompts"]) == \
		    (15, "dflash2", 1000, 300, 0, 40), h
		assert h["model"].startswith("synthetic: spec-trace-synth -K 15 -L %s -s 7 (acceptance by depth " % sys.argv[2])
		full = []
		for i, p in enumerate(t[1:]):
		    assert p["prompt"] == i and len(p["ids"]) == [5, 17, 9][i % 3] and "out" not in p
		    assert all(0 <= x < 1000 for x in p["ids"])
		    kept = 1
		    for k, a in p["rounds"]:
		        assert k == min(15, 300 - kept - 1) and 0 <= a <= k, (k, a, kept)
		        kept += a + 1
		        if k == 15:
		            full.append(a + 1)
		    assert kept == p["tokens"] == 300
		m = sum(full) / len(full)
		assert abs(m - L) < 0.02 * L, (m, L)	# the low-discrepancy draws: close to L
		if L == 1 or L == 16:
		    assert set(full) == {int(L)}
		EOF
	done
	# the same seed, the same trace; another seed, other ids and rounds, alike in mean
	synth -K 15 -L 4 -p 40 -l 5,17,9 -n 300 -V 1000 -s 7 >"$T/again.jsonl" 2>/dev/null
	cmp "$T/l4.jsonl" "$T/again.jsonl"
	synth -K 15 -L 4 -p 40 -l 5,17,9 -n 300 -V 1000 -s 8 >"$T/s8.jsonl" 2>/dev/null
	run -1 cmp -s "$T/l4.jsonl" "$T/s8.jsonl"
	# -d names the drafter; defaults: 8 prompts of 32 tokens, 64 new, vocabulary 8192
	run -0 --separate-stderr synth -K 3 -L 2 -d mtp
	[[ ${lines[0]} == '{"memra_spec_trace": 1, "K": 3, "drafter": "mtp", "model": "synthetic: '*'", "n_vocab": 8192, "n": 64, "temp": 0, "prompts": 8}' ]]
	[ "${#lines[@]}" -eq 9 ]
	[ -z "$(find "$T" -name '*.tmp.*')" ]
}

@test "spec-trace-synth misuse exits 2" {
	run -2 --separate-stderr synth -K 15
	[[ $stderr == "usage: spec-trace-synth -K K -L L "* ]]
	run -2 --separate-stderr synth -K 16 -L 2
	[ "$stderr" = "spec-trace-synth: -K '16': not a depth in 1..15" ]
	run -2 --separate-stderr synth -K 3 -L 4.5
	[ "$stderr" = "spec-trace-synth: -L 4.5: a round of 3 drafts keeps at most 4 tokens" ]
	run -2 --separate-stderr synth -K 3 -L 0.5
	[ "$stderr" = "spec-trace-synth: -L '0.5': not a mean of 1..16 tokens a round" ]
	run -2 --separate-stderr synth -K 3 -L 2 -l 4,0
	[ "$stderr" = "spec-trace-synth: -l '4,0': not a list of 1 to 64 lengths in 1..1000000" ]
	run -2 --separate-stderr synth -K 3 -L 2 -d DFlash
	[ "$stderr" = "spec-trace-synth: -d 'DFlash': \"drafter\": not 1 to 31 of a-z, 0-9 and -" ]
	run -2 --separate-stderr synth -K 3 -L 2 a b
}

@test "a synthetic trace replays with the DFlash2 drafter: its real drafts and block verifies, each round keeping what the trace says" {
	d=$(model_a)
	T=$BATS_TEST_TMPDIR
	synth -K 7 -L 3.5 -p 3 -l 6,11 -n 40 "$T/s.jsonl" 2>/dev/null
	export MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT=$DATA/dflash/d2
	run -0 --separate-stderr run-spec -t 2 --trace-in "$T/s.jsonl" --trace-out "$T/r.jsonl" "$d"
	[[ $stderr == *"[trace] K=7: 3 prompts recorded with the dflash2 drafter on synthetic: spec-trace-synth -K 7 -L 3.5 -s 1 (acceptance by depth "*"), replayed with the dflash2 drafter on their own ids"* ]]
	[[ ${lines[1]} == "plain	7	"*"	120	"*"	3	-	-	-	-	-	-	-" ]]
	r=${lines[2]}
	[ "$(field "$r" 1-2)" = "replay	7" ]
	[ "$(field "$r" 4)" = 120 ]
	[ "$(field "$r" 12)" = - ]	# no tokens in the trace to compare
	# the replay's rounds, drafts and acceptance are the trace's, and its trace (with the tokens) the same rounds
	python3 - "$T/s.jsonl" "$T/r.jsonl" "$r" <<-'EOF'
	import json, sys
	s = [json.loads(l) for l in open(sys.argv[1])]
	r = [json.loads(l) for l in open(sys.argv[2])]
	row = sys.argv[3].split("\t")
	assert r[0]["drafter"] == "dflash2" and r[0]["K"] == 7 and len(r) == len(s) == 4
	rounds = [x for p in s[1:] for x in p["rounds"] if x[0] > 0]
	assert [int(row[6]), int(row[7]), int(row[8])] == \
	    [len(rounds), sum(k for k, a in rounds), sum(a for k, a in rounds)], row
	for x, y in zip(s[1:], r[1:]):
	    assert (y["ids"], y["rounds"], y["tokens"]) == (x["ids"], x["rounds"], x["tokens"])
	    assert len(y["out"]) == 40
	EOF
	# on a model of another vocabulary (and its MTP head): fixed ids, the same rounds
	unset MEMRA_DSPARK_SPEC MEMRA_DSPARK_DRAFT
	run -0 --separate-stderr run-spec -t 2 --trace-in "$T/s.jsonl" --trace-arm replay "$DATA/moe/moe-e8k2-mtp"
	[ "$(field "${lines[1]}" 7-9)" = "$(field "$r" 7-9)" ]
	[[ $stderr == *"replayed with the mtp drafter on fixed ids (the model's vocabulary of 320 tokens is not the trace's 8192)"* ]]
}

@test "a trunk without an MTP head drafts with an armed DFlash2 drafter; --trace-arm plain needs no drafter at all" {
	d=$(model_a)
	T=$BATS_TEST_TMPDIR
	mkdir "$T/nomtp"	# A with its MTP layer unused: mtp_num_hidden_layers 0
	for f in "$d"/*; do ln -s "$f" "$T/nomtp/"; done
	rm "$T/nomtp/config.json"
	python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["mtp_num_hidden_layers"] = 0
json.dump(c, open(sys.argv[2], "w"))' "$d/config.json" "$T/nomtp/config.json"
	run -1 --separate-stderr run-spec --raw -K 1 -n 8 -t 2 "$T/nomtp" "def f(x):"
	[ "$stderr" = "run-spec: $T/nomtp: model has no MTP head or assistant drafter to draft with" ]
	run -0 --separate-stderr run-spec --raw -K 1-3 -n 16 -t 2 --dspark-spec 1 --dspark-draft "$DATA/dflash/d2" "$T/nomtp" "def f(x):"
	for k in 1 2 3; do
		[[ ${lines[$k]} == "K=$k "*"PASS (identical to plain)" ]]
	done
	[[ $stderr != *"MTP head stays unused"* ]]
	synth -K 3 -L 2 -p 1 -n 12 "$T/s.jsonl" 2>/dev/null
	run -0 --separate-stderr run-spec -t 2 --trace-in "$T/s.jsonl" --trace-arm plain "$T/nomtp"
	[[ ${lines[1]} == "plain	3	"*"	12	"* ]]
	[[ $stderr == *", replayed without a drafter (plain decoding alone) on their own ids" ]]
	run -1 --separate-stderr run-spec -t 2 --trace-in "$T/s.jsonl" --trace-arm replay "$T/nomtp"
	[ "${stderr_lines[-1]}" = "run-spec: $T/nomtp: model has no MTP head or assistant drafter to draft with" ]
}

@test "trace misuse exits 2" {
	d=$(model_a)
	record "$BATS_TEST_TMPDIR/a.jsonl" 2 8 1
	t=$BATS_TEST_TMPDIR/a.jsonl
	run -2 --separate-stderr run-spec --trace-in "$t" "$d" hi
	[ "$stderr" = "run-spec: --trace-in: the trace's prompts are replayed: no prompt, -f or --jsonl" ]
	run -2 --separate-stderr run-spec --trace-in "$t" --jsonl "$d"
	run -2 --separate-stderr run-spec --trace-in "$t" --temp 0.5 "$d"
	[ "$stderr" = "run-spec: --trace-in: the replay verifies greedily: no --temp" ]
	run -2 --separate-stderr run-spec --trace-in "$t" -K 1-2 "$d"
	[ "$stderr" = "run-spec: -K 1: $t has no section of K=1 (its K: 2)" ]
	run -2 --separate-stderr run-spec --trace-in "$t" --trace-arm both2 "$d"
	[ "${stderr_lines[0]}" = "run-spec: --trace-arm: 'both2': not both, plain or replay" ]
	run -2 --separate-stderr run-spec --trace-arm plain "$d" hi
	[ "$stderr" = "run-spec: --trace-arm: only with --trace-in" ]
	run -2 --separate-stderr run-spec --trace-in "$t" --trace-arm plain --trace-out "$t.2" "$d"
	[ "$stderr" = "run-spec: --trace-out: --trace-arm plain replays no rounds to record" ]
	run -2 --separate-stderr run-spec --trace-out - "$d" hi
	[ "$stderr" = "run-spec: --trace-out: '-': the report is standard output: name a file" ]
}

@test "tools/spec-replay-bench.sh: A's traces recorded, plain decode against the replay A B B A, a row a K" {
	d=$(model_a)
	o=$BATS_TEST_TMPDIR/out
	A=$d KS=1-2 PROMPTS=2 N=12 RECORD_ARGS='-t 2' RUN_SPEC_ARGS='-t 2' MODEL_NAME=moe-e8k2-mtp \
	    run -0 spec-replay-bench.sh "$DATA/moe/moe-e8k2-mtp" "$o"
	[[ $output == *"best K="[12]": "*"x plain decode"* ]]
	[ "$(cut -f7,9,13,14 "$o/replay.tsv")" = "$(printf 'scenario\tn\tunit\tpeer\nspec-replay-k1\t2\ttok/s\tplain-decode\nspec-replay-k2\t2\ttok/s\tplain-decode')" ]
	[ "$(grep -c '^### block 0 arm [AB]' "$o/replay-k2.log")" -eq 4 ]
	# the summary's acceptance is the recording's K line's
	for k in 1 2; do
		row=$(awk -v k=$k -F'\t' '$1 == k' "$o/summary.tsv")
		grep -q "^K=$k .* acceptance $(field "$row" 6)/$(field "$row" 7) = .*PASS" "$o/record.log"
	done
	run -2 --separate-stderr spec-replay-bench.sh
	[ "$stderr" = "spec-replay-bench.sh: usage: spec-replay-bench.sh FILE [OUTDIR]" ]
	run -1 --separate-stderr spec-replay-bench.sh "$BATS_TEST_TMPDIR/none.gguf"
	[ "$stderr" = "spec-replay-bench.sh: $BATS_TEST_TMPDIR/none.gguf: no such file" ]
}
