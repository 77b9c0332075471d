bats_require_minimum_version 1.5.0

# Fixture model A: its HF directory (exact against refs.json) and a Q8_0 GGUF.
setup_file() {
	load helper
	a=$(model_a) || return 0
	export GGUF="$BATS_FILE_TMPDIR/a-q8.gguf"
	quant-nvfp4 -t 1 --type Q8_0 "$a" "$GGUF"
}

setup() {
	load helper
	A=$(model_a)
	P=$BATS_TEST_TMPDIR
	head -3 "$A/prompts.jsonl" >"$P/p3.jsonl"
}

@test "--help matches the man page SYNOPSIS" {
	command -v mandoc >/dev/null || skip "mandoc not installed"
	syn=$(mandoc -Tascii "$TOP/man/frspec-owngen.1" | sed 's/.\x08//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
	    sed '1d;$d' | tr -s ' \n\t' ' ')
	use=$(frspec-owngen --help | sed -n '1s/^usage: //p' | tr -s ' \n\t' ' ')
	[ "$syn" = " $use" ]
}

@test "raw ranks of the HF checkpoint are the reference's greedy ids ranked by count" {
	run -0 --separate-stderr frspec-owngen -t 2 --raw --ngen 8 "$A" "$P/r.gguf" 20 "$P/p3.jsonl"
	# refs.json: the first 8 greedy ids of prompts 0-2, ranked by count, ties by id
	python3 -c '
import json, sys, collections
r = json.load(open(sys.argv[1] + "/refs.json"))["b_greedy"]
c = collections.Counter(i for x in r[:3] for i in x["new_ids"][:8])
ids = sorted(range(8192), key=lambda i: (-c[i], i))[:20]
print("\n".join(map(str, ids)))
print("top 20 covers %.2f%% of 24 own-generated tokens (%d distinct)" % (100 * sum(c[i] for i in ids) / 24, len(c)), file=sys.stderr)' "$A" >"$P/want.txt" 2>"$P/want.cov"
	diff "$P/want.txt" "$P/r.gguf.txt"
	[ "${lines[0]}" = "$(cat "$P/want.cov")" ]
	[ "${lines[1]}" = "serve with: MEMRA_FRSPEC_TRIM=$P/r.gguf.txt" ]
	[ "$stderr" = "frspec-owngen: warning: 24 own-generated tokens is below the corpus floor of 4 x 20 = 80; ranks past the head of the distribution are noise: add prompts" ]
}

@test "the .gguf holds the same ids as d2t I32 with the vocabulary size" {
	need_py gguf
	frspec-owngen -t 2 --ngen 4 "$GGUF" "$P/r.gguf" 50 "$P/p3.jsonl" >/dev/null 2>&1
	run -0 python3 -c '
import sys, gguf
r = gguf.GGUFReader(sys.argv[1]); (t,) = r.tensors
assert t.name == "d2t" and t.tensor_type == gguf.GGMLQuantizationType.I32
assert int(r.fields["frspec.vocab_size"].parts[-1][0]) == 8192
print("\n".join(str(int(i)) for i in t.data))' "$P/r.gguf"
	diff <(printf '%s\n' "${lines[@]}") "$P/r.gguf.txt"
	run -0 trim-head -n 50 "$GGUF" "$P/r.gguf" "$P/draft.gguf"	# usable at once
}

@test "no floor warning when the corpus is at least 4 x topn" {
	run -0 --separate-stderr frspec-owngen -t 2 --ngen 8 "$GGUF" "$P/r.gguf" 6 "$P/p3.jsonl"
	[[ ${lines[0]} == "top 6 covers "*"% of 24 own-generated tokens ("*" distinct)" ]]
	[ -z "$stderr" ]
}

@test "the chat template is on by default and --raw turns it off" {
	frspec-owngen -t 2 --ngen 4 --corpus-out "$P/chat.txt" "$GGUF" "$P/c.gguf" 8 "$P/p3.jsonl" >/dev/null 2>&1
	frspec-owngen -t 2 --ngen 4 --raw --corpus-out "$P/raw.txt" "$GGUF" "$P/r.gguf" 8 "$P/p3.jsonl" >/dev/null 2>&1
	[ "$(head -1 "$P/chat.txt")" = "# frspec-owngen corpus v1: prompts=3 ngen=4 temp=0 seed=0 chat" ]
	[ "$(head -1 "$P/raw.txt")" = "# frspec-owngen corpus v1: prompts=3 ngen=4 temp=0 seed=0 raw" ]
	! cmp -s <(tail -n +2 "$P/chat.txt") <(tail -n +2 "$P/raw.txt") || false
}

@test "prompt sources: files, directories (recursed), .jsonl strings and objects, stdin" {
	mkdir -p "$P/d/sub"
	printf 'def f():\n' >"$P/d/a.txt"
	printf '# notes\n' >"$P/d/sub/b.md"
	printf 'ignored\n' >"$P/d/sub/c.py"
	printf 'a dataset card\n' >"$P/d/README.md"
	printf '"import os"\n\n{"prompt": "class A:"}\n' >"$P/d/sub/e.jsonl"
	run -0 --separate-stderr frspec-owngen -v -t 2 --ngen 1 "$GGUF" "$P/r.gguf" 4 "$P/d" - <<'IN'
print(
{"prompt": "x = 1"}
"y = 2"
IN
	n=$(printf '%s\n' "$stderr" | grep -c '^\[frspec-owngen\] prompt ')
	[ "$n" = 7 ]
	printf '%s\n' "$stderr" | grep -q '^\[frspec-owngen\] prompt 7/7: +1 tokens (total 7)$'
}

@test "hfds: prompts come from a dataset on the hub (loopback)" {
	mkdir -p "$P/root/datasets/o/d/sub"
	printf '"def f():"\n{"prompt": "import os"}\n' >"$P/root/datasets/o/d/train.jsonl"
	printf '"x = 1"\n' >"$P/root/datasets/o/d/sub/test.jsonl"
	printf 'a card\n' >"$P/root/datasets/o/d/README.md"
	python3 "$TOP/t/fakehub.py" --root "$P/root" --port-file "$P/port" --log "$P/hub.log" 3>&- &
	pid=$!
	for _ in $(seq 200); do [ -s "$P/port" ] && break; sleep 0.05; done
	export HF_ENDPOINT="http://127.0.0.1:$(cat "$P/port")"
	run -0 --separate-stderr frspec-owngen -v -t 2 --ngen 1 "$GGUF" "$P/r.gguf" 2 'hfds:o/d:*.jsonl'
	kill "$pid"; wait "$pid" 2>/dev/null || true
	n=$(printf '%s\n' "$stderr" | grep -c '^\[frspec-owngen\] prompt ')
	[ "$n" = 3 ]
}

@test "a bad .jsonl line fails with 1 and names the line" {
	printf '"ok"\n{"text": "x"}\n' >"$P/bad.jsonl"
	run -1 --separate-stderr frspec-owngen --ngen 1 "$GGUF" "$P/r.gguf" 4 "$P/bad.jsonl"
	[ "$stderr" = "frspec-owngen: $P/bad.jsonl: line 2: want a string or {\"prompt\": string}" ]
	[ ! -e "$P/r.gguf" ]
}

@test "each built-in pack holds 1024 prompts" {
	for k in code chat agentic mixed; do
		run -0 --separate-stderr frspec-owngen -t 2 --preset "$k" --limit 1 --ngen 1 \
		    --corpus-out "$P/$k.txt" "$GGUF" "$P/$k.gguf" 4
		[[ $stderr == *"frspec-owngen: 1 of 1024 prompts done; run again to continue from '$P/$k.txt'" ]]
	done
}

@test "--limit and reruns resume to the same corpus and ranks as one run" {
	frspec-owngen -t 2 --ngen 6 --corpus-out "$P/one.txt" "$GGUF" "$P/one.gguf" 4 "$P/p3.jsonl" >/dev/null 2>&1
	run -0 --separate-stderr frspec-owngen -t 2 --ngen 6 --limit 1 --corpus-out "$P/ids.txt" "$GGUF" "$P/r.gguf" 4 "$P/p3.jsonl"
	[[ $stderr == *"1 of 3 prompts done"* ]]
	[ "$(wc -l <"$P/ids.txt")" = 2 ]
	run -0 --separate-stderr frspec-owngen -t 2 --ngen 6 --limit 1 --corpus-out "$P/ids.txt" "$GGUF" "$P/r.gguf" 4 "$P/p3.jsonl"
	[[ $stderr == *"2 of 3 prompts done"* ]]
	run -0 --separate-stderr frspec-owngen -v -t 2 --ngen 6 --corpus-out "$P/ids.txt" "$GGUF" "$P/r.gguf" 4 "$P/p3.jsonl"
	[ "${stderr_lines[0]}" = "[frspec-owngen] prompt 3/3: +6 tokens (total 18)" ]
	[[ ${stderr_lines[1]} =~ ^\[frspec-owngen\]\ 1\ prompts,\ 6\ tokens\ in\ [0-9.]+\ s:\ [0-9.]+\ tok/s\ \(batch\ 8\)$ ]]
	[ "${#stderr_lines[@]}" = 2 ]
	cmp "$P/one.txt" "$P/ids.txt"
	cmp "$P/one.gguf.txt" "$P/r.gguf.txt"
	cmp "$P/one.gguf" "$P/r.gguf"
}

@test "an interrupted run's cut line is dropped and generated again" {
	frspec-owngen -t 2 --ngen 6 --corpus-out "$P/one.txt" "$GGUF" "$P/one.gguf" 4 "$P/p3.jsonl" >/dev/null 2>&1
	head -c -5 "$P/one.txt" >"$P/ids.txt"	# killed while writing the third line
	run -0 --separate-stderr frspec-owngen -v -t 2 --ngen 6 --corpus-out "$P/ids.txt" "$GGUF" "$P/r.gguf" 4 "$P/p3.jsonl"
	[ "${stderr_lines[0]}" = "[frspec-owngen] prompt 3/3: +6 tokens (total 18)" ]
	[ "${#stderr_lines[@]}" = 2 ]
	cmp "$P/one.txt" "$P/ids.txt"
	cmp "$P/one.gguf.txt" "$P/r.gguf.txt"
}

@test "--batch: the corpus and the ranks are byte-identical for any batch size" {
	head -7 "$A/prompts.jsonl" >"$P/p7.jsonl"
	printf '"Hi"\n"Write one word about the sea, then stop."\n' >>"$P/p7.jsonl"	# prompts of other lengths
	for b in 1 4 9; do
		frspec-owngen -t 2 --batch $b --ngen 12 --corpus-out "$P/c$b.txt" "$GGUF" "$P/r$b.gguf" 16 "$P/p7.jsonl" >"$P/o$b" 2>&1
	done
	# (model A never stops before --ngen: t/model-batch.bats covers sequences ending apart)
	[ "$(wc -l <"$P/c1.txt")" = 10 ]
	for b in 4 9; do
		cmp "$P/c1.txt" "$P/c$b.txt"
		cmp "$P/r1.gguf" "$P/r$b.gguf"
		cmp "$P/r1.gguf.txt" "$P/r$b.gguf.txt"
		[ "$(head -1 "$P/o1")" = "$(head -1 "$P/o$b")" ]	# the coverage line
	done
	# sampling draws at (seed, position), not in call order: batching keeps it too
	for b in 1 5; do
		frspec-owngen -t 2 --batch $b --temp 0.9 --seed 7 --ngen 12 --corpus-out "$P/t$b.txt" "$GGUF" "$P/t$b.gguf" 16 "$P/p7.jsonl" >/dev/null 2>&1
	done
	cmp "$P/t1.txt" "$P/t5.txt"
	! cmp -s <(tail -n +2 "$P/c1.txt") <(tail -n +2 "$P/t1.txt") || false	# it did sample
}

@test "--batch: an interrupted batched run resumes where it stopped, with any batch size" {
	head -7 "$A/prompts.jsonl" >"$P/p7.jsonl"
	frspec-owngen -t 2 --batch 1 --ngen 6 --corpus-out "$P/one.txt" "$GGUF" "$P/one.gguf" 8 "$P/p7.jsonl" >/dev/null 2>&1
	run -0 --separate-stderr frspec-owngen -t 2 --batch 4 --ngen 6 --limit 3 --corpus-out "$P/ids.txt" "$GGUF" "$P/r.gguf" 8 "$P/p7.jsonl"
	[[ $stderr == *"3 of 7 prompts done"* ]]
	head -c -3 "$P/ids.txt" >"$P/cut" && cat "$P/cut" >"$P/ids.txt"	# killed while writing line 3
	run -0 --separate-stderr frspec-owngen -v -t 2 --batch 3 --ngen 6 --corpus-out "$P/ids.txt" "$GGUF" "$P/r.gguf" 8 "$P/p7.jsonl"
	[ "${stderr_lines[0]}" = "[frspec-owngen] prompt 3/7: +6 tokens (total 18)" ]
	[ "${stderr_lines[4]}" = "[frspec-owngen] prompt 7/7: +6 tokens (total 42)" ]
	cmp "$P/one.txt" "$P/ids.txt"
	cmp "$P/one.gguf" "$P/r.gguf"
	cmp "$P/one.gguf.txt" "$P/r.gguf.txt"
}

@test "a corpus made with other settings is refused" {
	frspec-owngen -t 2 --ngen 2 --limit 1 --corpus-out "$P/ids.txt" "$GGUF" "$P/r.gguf" 10 "$P/p3.jsonl" 2>/dev/null
	run -1 --separate-stderr frspec-owngen -t 2 --ngen 3 --corpus-out "$P/ids.txt" "$GGUF" "$P/r.gguf" 10 "$P/p3.jsonl"
	[ "$stderr" = "frspec-owngen: $P/ids.txt: made with other prompts or settings; remove it to start over" ]
	printf '# frspec-owngen corpus v1: prompts=3 ngen=2 temp=0 seed=0 chat\n1 2\n9999 3\n' >"$P/ids.txt"
	run -1 --separate-stderr frspec-owngen -t 2 --ngen 2 --corpus-out "$P/ids.txt" "$GGUF" "$P/r.gguf" 10 "$P/p3.jsonl"
	[ "$stderr" = "frspec-owngen: $P/ids.txt: line 3: not a token id of this model" ]
}

@test "progress shows on a terminal, not in a pipe" {
	command -v script >/dev/null || skip "script(1) not installed"
	run -0 script -qec "frspec-owngen -t 2 --ngen 3 '$GGUF' '$P/r.gguf' 2 '$P/p3.jsonl'" /dev/null
	[[ $output == *"prompts: 3.0/3.0 (100%)"* ]]
	run -0 --separate-stderr frspec-owngen -t 2 --ngen 3 "$GGUF" "$P/r.gguf" 2 "$P/p3.jsonl"
	[ -z "$stderr" ]
}

@test "--validate: ABBA A/B of trimmed vs untrimmed drafting, acceptance, tok/s and a verdict" {
	run -0 --separate-stderr frspec-owngen -t 2 --raw --ngen 8 --validate --validate-ngen 6 \
	    --validate-rounds 1 "$GGUF" "$P/r.gguf" 64 "$P/p3.jsonl"
	[ "${lines[2]}" = "validate: K=3, 3 held-out prompts x 6 tokens, 1 ABBA round" ]
	num='[0-9]+/[0-9]+ = [0-9.]+% [0-9.]+ tok/s \(median of 2, spread [0-9.]+%\)'
	[[ ${lines[3]} =~ ^trimmed\ \ \ acceptance\ $num$ ]]
	[[ ${lines[4]} =~ ^untrimmed\ acceptance\ $num$ ]]
	# the speed is noise here: only the form of the verdict is checked
	[[ ${lines[5]} =~ ^verdict\ (GOOD|WASH|BAD)\ \(trimmed\ [0-9.]+x\ untrimmed\)$ ]]
	[ "${#lines[@]}" = 6 ]
}

@test "--validate --heldout: the A/B runs on the user's held-out prompts" {
	sed -n 4,5p "$A/prompts.jsonl" >"$P/held.jsonl"
	printf 'Tell me about rivers.\n' >"$P/held.txt"
	run -0 --separate-stderr frspec-owngen -t 2 --raw --ngen 4 --validate --validate-ngen 4 \
	    --validate-rounds 1 --heldout "$P/held.jsonl" --heldout "$P/held.txt" "$GGUF" "$P/r.gguf" 16 "$P/p3.jsonl"
	[ "${lines[2]}" = "validate: K=3, 3 held-out prompts x 4 tokens, 1 ABBA round" ]
	[[ ${lines[5]} =~ ^verdict\ (GOOD|WASH|BAD)\  ]]
}

@test "--heldout: a held-out prompt that is also ranked is refused before any generation" {
	sed -n 2,4p "$A/prompts.jsonl" >"$P/held.jsonl"	# line 2 of these is prompt 3 of p3
	run -1 --separate-stderr frspec-owngen -t 2 --ngen 4 --validate --heldout "$P/held.jsonl" \
	    --corpus-out "$P/ids.txt" "$GGUF" "$P/r.gguf" 16 "$P/p3.jsonl"
	[[ $stderr == "frspec-owngen: held-out prompt 1 is also a prompt to rank ('"*"'): validate on prompts the ranks have not seen" ]]
	[ ! -e "$P/r.gguf" ]
	[ ! -e "$P/ids.txt" ]
	# the built-in held-out set is held to the same rule
	printf 'In a few paragraphs, tell me how a refrigerator keeps food cold.' >"$P/fridge.txt"
	run -1 --separate-stderr frspec-owngen -t 2 --ngen 4 --validate "$GGUF" "$P/r.gguf" 16 "$P/fridge.txt"
	[ "$stderr" = "frspec-owngen: held-out prompt 2 is also a prompt to rank ('In a few paragraphs, tell me how a refri...'): validate on prompts the ranks have not seen" ]
	run -2 --separate-stderr frspec-owngen --heldout "$P/held.jsonl" "$GGUF" "$P/r.gguf" 16 "$P/p3.jsonl"
	[ "$stderr" = "frspec-owngen: --heldout needs --validate" ]
	run -1 --separate-stderr frspec-owngen --validate --heldout "$P/none.txt" "$GGUF" "$P/r.gguf" 16 "$P/p3.jsonl"
	[ "$stderr" = "frspec-owngen: $P/none.txt: No such file or directory" ]
}

@test "misuse exits 2" {
	run -2 --separate-stderr frspec-owngen "$GGUF"
	run -2 --separate-stderr frspec-owngen "$GGUF" "$P/r.gguf" 0 "$P/p3.jsonl"
	run -2 --separate-stderr frspec-owngen --ngen 0 "$GGUF" "$P/r.gguf" 4 "$P/p3.jsonl"
	run -2 --separate-stderr frspec-owngen --validate-ngen 0 "$GGUF" "$P/r.gguf" 4 "$P/p3.jsonl"
	run -2 --separate-stderr frspec-owngen --validate-rounds x "$GGUF" "$P/r.gguf" 4 "$P/p3.jsonl"
	run -2 --separate-stderr frspec-owngen --preset poems "$GGUF" "$P/r.gguf"
	run -2 --separate-stderr frspec-owngen --batch 0 "$GGUF" "$P/r.gguf" 4 "$P/p3.jsonl"
	run -2 --separate-stderr frspec-owngen --batch 65 "$GGUF" "$P/r.gguf" 4 "$P/p3.jsonl"
	[ "${stderr_lines[0]}" = "frspec-owngen: --batch '65' is not an integer in [1, 64]" ]
	run -2 --separate-stderr frspec-owngen --limit 2 "$GGUF" "$P/r.gguf" 4 "$P/p3.jsonl"
	[ "$stderr" = "frspec-owngen: --limit needs --corpus-out, so that a rerun can continue" ]
	run -2 --separate-stderr frspec-owngen --ngen 1 "$GGUF" "$P/r.gguf" 8193 "$P/p3.jsonl"
	[ "$stderr" = "frspec-owngen: topn 8193 is larger than the vocabulary (8192 tokens)" ]
	[ ! -e "$P/r.gguf" ]
}

@test "MEMRA_CUDA_GRAPH other than 0, 1 or stats is misuse (exit 2)" {
	MEMRA_CUDA_GRAPH=on run -2 --separate-stderr frspec-owngen model.gguf ranks.gguf 8 prompts
	[ "$stderr" = "frspec-owngen: MEMRA_CUDA_GRAPH: 'on': not 0, 1 or stats" ]
}

@test "MEMRA_CUDA_PDL other than 0 or 1 is misuse (exit 2)" {
	MEMRA_CUDA_PDL=on run -2 --separate-stderr frspec-owngen model.gguf ranks.gguf 8 prompts
	[ "$stderr" = "frspec-owngen: MEMRA_CUDA_PDL: 'on': not 0 or 1" ]
}
