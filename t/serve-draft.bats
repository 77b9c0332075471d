bats_require_minimum_version 1.5.0
# serve speculating with the drafters that are not an MTP head, through the openai client:
# Gemma-4's assistant (MEMRA_DRAFT, t/data/gemma4) and the DFlash2 block drafter
# (MEMRA_DSPARK_SPEC, t/data/dflash on model A).  Every greedy reply is the plain decode's,
# whenever it joins; the boot lines are the cookbook's proof.

setup() {
	load helper
	load serve
	P=$BATS_TEST_TMPDIR
	SC="python3 $TOP/t/serve-client.py"
	SPID=
	G=$DATA/gemma4
	D2=$DATA/dflash/d2
}

teardown() { serve_teardown; }

# reqs MODEL N DT PROMPTS...: N completions requests, one every DT seconds, the prompts in
# turn (each cut to a length of its own), greedy but every third sampled, every fourth streamed
reqs() {
	python3 - "$@" <<'PY'
import json, sys
model, n, dt, ps = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
for i in range(n):
    p = ps[i % len(ps)]
    q = {"model": model, "prompt": p[: 8 + (41 * i) % max(len(p) - 8, 1)],
         "max_tokens": 6 + (7 * i) % 22, "temperature": 0, "delay": round(dt * i, 2)}
    if i % 3 == 2:
        q.update(temperature=0.8, top_p=0.95, seed=100 + i)
    if i % 4 == 1:
        q["stream"] = True
    print(json.dumps(q))
PY
}

# metric NAME: the sum of a counter's series on the server's /metrics
metric() {
	curl -s "$URL/metrics" | awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { print s + 0 }'
}

# plain_replies FILE [VAR=VALUE...]: the requests of FILE one by one on a plain server
plain_replies() {
	local f=$1
	shift
	start_serve "$@" MEMRA_MAX_SESSIONS=1 MEMRA_SPEC_K=0
	run -0 $SC "$URL" solo "$f"
	echo "$output" >"$P/plain"
	[ "$(grep -c '"text"' "$P/plain")" -eq "$(wc -l <"$f")" ]
	stop_serve
}

@test "Gemma-4 assistant: staggered requests each get their plain reply, K pinned and by load" {
	need_py openai
	reqs g 14 0.1 "hello world, the quick brown fox jumps over the lazy dog again and again" \
	    "once upon a time there was a tiny model that drafted its own tokens" >"$P/q.jsonl"
	plain_replies "$P/q.jsonl" MEMRA_MODELS="g=$G/g4-dense"
	seq 0 255 >"$P/r.txt"
	for k in 3 by-load; do
		start_serve memra-server MEMRA_COMPAT=openai MEMRA_MODELS="g=$G/g4-dense" \
		    MEMRA_DRAFT="$G/g4-assistant" MEMRA_GEMMA_DRAFT_RANKS="$P/r.txt" MEMRA_MAX_SESSIONS=6 \
		    MEMRA_PREFILL_CHUNK=32 MEMRA_SPEC_K=${k#by-load}
		grep -qx "\[gemma-draft\] assistant drafter: 3 layers, hidden 24 over the trunk's K/V, head trimmed to 256 rows (F32, d2t map)" "$LOG"
		grep -qx '\[model\] g: ctx=4096 K=3 (assistant speculative decode for greedy requests)' "$LOG"
		run -0 $SC "$URL" staggered "$P/q.jsonl"
		diff "$P/plain" - <<<"$output"
		if [ "$k" = 3 ]; then
			grep -qx '\[sched\] g: speculative K pinned at 3 (MEMRA_SPEC_K)' "$LOG"
			[ "$(metric memra_spec_rounds_total)" -gt 0 ]
		else
			grep -q '^\[sched\] g: a step of m rows (ms): .*; a draft [0-9.e+-]* ms (an assistant step)$' "$LOG"
		fi
		stop_serve
	done
}

@test "the cookbook's DFlash2 block runs unchanged: its proof lines, and every reply plain's" {
	need_py openai
	A=$(model_a)
	printf '286\n11\n15\n72\n6043\n604\n519\n43\n' >"$P/r8.txt"
	python3 - "$A/prompts.jsonl" >"$P/p" <<'PY'
import json, sys
for l in list(open(sys.argv[1]))[:4]:
    print(json.loads(l)["prompt"][:300].replace("\n", " "))
PY
	mapfile -t ps <"$P/p"
	reqs q38 12 0.15 "def fibonacci(n):" "${ps[@]}" >"$P/q.jsonl"
	plain_replies "$P/q.jsonl" MEMRA_MODELS="q38=$A"
	start_serve memra-server MEMRA_COMPAT=openai MEMRA_MODELS="q38=$A" MEMRA_DSPARK_SPEC=1 \
	    MEMRA_DSPARK_DRAFT="$D2" MEMRA_FRSPEC_TRIM="$P/r8.txt" MEMRA_DFLASH_PREC=q4 \
	    MEMRA_CTX=8192 MEMRA_MAX_SESSIONS=8 MEMRA_PREFIX_CACHE_MB=0
	grep -qx "\[dspark\] arming DFlash2 disables MTP spec (the trunk's MTP head stays unused)" "$LOG"
	grep -qx "\[dspark\] q38: DFlash2 drafter $D2: 2 layers, block 8, taps \[2,5\], window 16, weights Q4_0" "$LOG"
	grep -qx '\[dspark\] q38: DFlash2 draft head TRIMMED to 8 rows' "$LOG"
	grep -qx '\[dspark\] q38: precision q4 (MEMRA_DFLASH_PREC)' "$LOG"
	grep -qx '\[model\] q38: ctx=8192 K=7 (DFlash2 speculative decode for greedy requests)' "$LOG"
	# the drafter's context cache a session: its full-attention layer (8192 + 8) x 32 x 2
	# floats, its sliding layer's ring (16 - 1 + 8) x 32 x 2 and the pool's copy of it
	grep -qx '\[dspark\] q38: context cache 2.01 MiB a session (the pool.s copy of its rings included): 1 of 2 layers (sliding, window 16) a ring of 23 positions, the rest every position (ctx + block)' "$LOG"
	grep -q '^\[sched\] q38: a step of m rows (ms): .*; a round.s drafts [0-9.e+-]* ms (the drafter.s block and a context row)$' "$LOG"
	grep -q '^\[sched\] q38: speculative K by load, up to 7 ' "$LOG"
	! grep -q '^\[frspec-trim\]' "$LOG" || false
	run -0 $SC "$URL" staggered "$P/q.jsonl"
	diff "$P/plain" - <<<"$output"
	stop_serve
	# K pinned: every greedy session drafts, and the replies are still plain's
	start_serve MEMRA_MODELS="q38=$A" MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT="$D2" \
	    MEMRA_FRSPEC_TRIM="$P/r8.txt" MEMRA_MAX_SESSIONS=8 MEMRA_SPEC_K=7 MEMRA_PREFILL_CHUNK=64
	run -0 $SC "$URL" staggered "$P/q.jsonl"
	diff "$P/plain" - <<<"$output"
	[ "$(metric memra_spec_rounds_total)" -gt 0 ]
	[ "$(metric memra_spec_accepted_tokens_total)" -gt 0 ]
}

@test "DFlash2: a conversation's next turn resumes from the pool with the drafter's context" {
	need_py openai
	A=$(model_a)
	printf '286\n11\n15\n72\n6043\n604\n519\n43\n' >"$P/r8.txt"
	p1=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["prompt"][:400])' "$A/prompts.jsonl")
	start_serve MEMRA_MODELS="q38=$A" MEMRA_SPEC_K=0 MEMRA_PREFILL_CHUNK=32
	r1=$($SC "$URL" complete q38 "$p1" 16 | jq -r .text)
	p2="$p1$r1 def fibonacci(n):"
	want=$($SC "$URL" complete q38 "$p2" 16)
	stop_serve
	start_serve MEMRA_MODELS="q38=$A" MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT="$D2" \
	    MEMRA_FRSPEC_TRIM="$P/r8.txt" MEMRA_SPEC_K=7 MEMRA_PREFILL_CHUNK=32 MEMRA_PREFIX_CACHE_MB=0
	[ "$($SC "$URL" complete q38 "$p1" 16 | jq -r .text)" = "$r1" ]
	[ "$($SC "$URL" complete q38 "$p2" 16)" = "$want" ]
	grep -q '^\[worker\] dspark-reuse: [0-9]* committed tokens resumed (q38: of [0-9]* parked, with the drafter.s context; ' "$LOG"
	[ "$(metric memra_spec_rounds_total)" -gt 0 ]
}

# w8: d2's weights, both layers sliding at window 8, so the drafter's context is rings of 15
# rows alone: a turn resumed from the pool (its rings copied at the chunk boundary, the parked
# session having decoded past it) or from the prefix cache (the rings from the blocks)
@test "DFlash2 with rings alone: the next turn resumes from the pool and from the prefix cache, replies plain's" {
	need_py openai
	A=$(model_a)
	mkdir "$P/w8"
	cp "$DATA/dflash/w8/config.json" "$P/w8/"
	ln -s "$(realpath "$D2/model.safetensors")" "$P/w8/model.safetensors"
	printf '286\n11\n15\n72\n6043\n604\n519\n43\n' >"$P/r8.txt"
	p1=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["prompt"][:400])' "$A/prompts.jsonl")
	start_serve MEMRA_MODELS="q38=$A" MEMRA_SPEC_K=0 MEMRA_PREFILL_CHUNK=32
	r1=$($SC "$URL" complete q38 "$p1" 24 | jq -r .text)
	p2="$p1$r1 def fibonacci(n):"
	want=$($SC "$URL" complete q38 "$p2" 24)
	stop_serve
	for cache in "MEMRA_PREFIX_CACHE_MB=0" "MEMRA_REUSE_POOL=0"; do
		start_serve MEMRA_MODELS="q38=$A" MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT="$P/w8" \
		    MEMRA_FRSPEC_TRIM="$P/r8.txt" MEMRA_SPEC_K=7 MEMRA_PREFILL_CHUNK=32 MEMRA_CTX=4096 $cache
		grep -q '^\[dspark\] q38: context cache [0-9.]* MiB a session.*: 2 of 2 layers (sliding, window 8) a ring of 15 positions$' "$LOG"
		[ "$($SC "$URL" complete q38 "$p1" 24 | jq -r .text)" = "$r1" ]
		[ "$($SC "$URL" complete q38 "$p2" 24)" = "$want" ]
		[ "$(metric memra_spec_rounds_total)" -gt 0 ]
		[ "$(metric memra_cached_tokens_total)" -ge 32 ]
		[ "$cache" = MEMRA_REUSE_POOL=0 ] ||
		    grep -q '^\[worker\] dspark-reuse: [0-9]* committed tokens resumed (q38: of [0-9]* parked, with the drafter.s context; ' "$LOG"
		stop_serve
	done
	grep -q '^\[sched\] q38: prefix cache: [0-9]* MiB' "$LOG"
}

@test "DFlash2: blocks of 64 in chunks of 128: the next turn resumes from the prefix cache with the drafter's context rows" {
	need_py openai
	A=$(model_a)
	printf '286\n11\n15\n72\n6043\n604\n519\n43\n' >"$P/r8.txt"
	p1=$(python3 -c 'import json,sys; print("\n".join(json.loads(l)["prompt"] for l in open(sys.argv[1]).readlines()[:2]))' "$A/prompts.jsonl")
	start_serve MEMRA_MODELS="q38=$A" MEMRA_SPEC_K=0 MEMRA_PREFILL_CHUNK=128 MEMRA_PREFIX_CACHE_MB=0 \
	    MEMRA_REUSE_POOL=0
	r1=$($SC "$URL" complete q38 "$p1" 16 | jq -r .text)
	p2="$p1$r1 def fibonacci(n):"
	want=$($SC "$URL" complete q38 "$p2" 16)
	stop_serve
	start_serve MEMRA_MODELS="q38=$A" MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT="$D2" \
	    MEMRA_FRSPEC_TRIM="$P/r8.txt" MEMRA_SPEC_K=7 MEMRA_PREFILL_CHUNK=128 MEMRA_REUSE_POOL=0 \
	    MEMRA_PREFIX_CACHE_MB=64
	grep -q '^\[sched\] q38: prefix cache: [0-9]* MiB, [0-9]* blocks of 64 tokens' "$LOG"
	[ "$($SC "$URL" complete q38 "$p1" 16 | jq -r .text)" = "$r1" ]
	rounds=$(metric memra_spec_rounds_total)
	[ "$(metric memra_cached_tokens_total)" = 0 ]
	[ "$($SC "$URL" complete q38 "$p2" 16)" = "$want" ]
	cached=$(metric memra_cached_tokens_total)
	[ $((cached % 128)) = 64 ]	# inside a chunk: past blocks stored open
	# it drafted: the drafter's context rows came from the cache with the trunk's
	[ "$(metric memra_spec_rounds_total)" -gt "$rounds" ]
}

@test "the drafters' variables: bad values are misuse, a drafter not armed is said, a wrong one is an error" {
	A=$(model_a)
	MEMRA_DSPARK_SPEC=1 run -2 --separate-stderr env MEMRA_MODELS="q=$A" serve
	[ "$stderr" = "serve: MEMRA_DSPARK_SPEC=1: no drafter (MEMRA_DSPARK_DRAFT, --dspark-draft)" ]
	run -2 --separate-stderr env MEMRA_MODELS="q=$A" MEMRA_DSPARK_SPEC=yes serve
	[ "$stderr" = "serve: MEMRA_DSPARK_SPEC (--dspark-spec): 'yes': not 0 or 1" ]
	run -2 --separate-stderr env MEMRA_MODELS="q=$A" MEMRA_DFLASH_PREC=q5 serve
	[ "$stderr" = "serve: MEMRA_DFLASH_PREC (--dflash-prec): 'q5': not q4, q8, bf16, f32 or keep" ]
	run -2 --separate-stderr env MEMRA_MODELS="q=$A" MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT="$D2" \
	    MEMRA_SPEC_K=8 serve --device cpu
	[[ $stderr == *"serve: MEMRA_SPEC_K 8: the DFlash drafter drafts at most 7 tokens a round (its block of 8)" ]]
	run -1 --separate-stderr env MEMRA_MODELS="q=$A" MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT="$D2" \
	    MEMRA_MTP_DRAFT="$D2" serve --device cpu
	[[ $stderr == *"two spec programs never coexist" ]]
	run -1 --separate-stderr env MEMRA_MODELS="g=$G/g4-dense" MEMRA_DRAFT="$G/g4-moe-keqv" serve --device cpu
	[[ $stderr == *"not a gemma4_assistant"* ]]
	run -2 --separate-stderr env MEMRA_MODELS="g=$G/g4-dense" MEMRA_DRAFT="$G/g4-assistant" \
	    MEMRA_GEMMA_TRIM_ADAPT=512 serve --device cpu
	[ "$stderr" = "serve: MEMRA_GEMMA_TRIM_ADAPT (--gemma-trim-adapt): learned slots extend a trimmed head: set MEMRA_GEMMA_DRAFT_RANKS (--gemma-draft-ranks) too" ]
	run -2 --separate-stderr env MEMRA_MODELS="g=$G/g4-dense" MEMRA_DRAFT="$G/g4-assistant" \
	    MEMRA_GEMMA_DRAFT_RANKS="$P/r.txt" serve --device cpu --gemma-trim-adapt -1
	[ "$stderr" = "serve: MEMRA_GEMMA_TRIM_ADAPT (--gemma-trim-adapt): '-1': out of range 0..65536 or not a number" ]
	seq 0 255 >"$P/r.txt"
	printf '300 2\n300 1\n' >"$P/r.txt.learned"
	run -1 --separate-stderr env MEMRA_MODELS="g=$G/g4-dense" MEMRA_DRAFT="$G/g4-assistant" \
	    MEMRA_GEMMA_DRAFT_RANKS="$P/r.txt" MEMRA_GEMMA_TRIM_ADAPT=8 serve --device cpu -t 2
	[ "${stderr##*$'\n'}" = "serve: $G/g4-dense: draft '$G/g4-assistant': learned draft slots (MEMRA_GEMMA_TRIM_ADAPT): $P/r.txt.learned: line 2: id 300 repeats line 1" ]
	run -1 --separate-stderr env MEMRA_MODELS="g=$G/g4-dense" MEMRA_GEMMA_DRAFT_RANKS="$G/nope.txt" \
	    serve --device cpu
	[[ $stderr == *"a drafter's rank list without a drafter (MEMRA_DRAFT)" ]]
	# the flags are the variables: --dspark-spec 0 over MEMRA_DSPARK_SPEC=1 leaves the MTP head
	printf '#!/bin/sh\nexec serve --dspark-spec 0 "$@"\n' >"$P/off" && chmod +x "$P/off"
	SERVE=$P/off start_serve MEMRA_MODELS="q=$A" MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT="$D2" \
	    MEMRA_SPEC_K=2 MEMRA_MAX_SESSIONS=1
	grep -qx "\[dspark\] drafter $D2 not armed (MEMRA_DSPARK_SPEC is not 1): MTP spec as before" "$LOG"
	grep -qx '\[model\] q: ctx=4096 K=2 (MTP speculative decode for greedy requests)' "$LOG"
	stop_serve
	printf '#!/bin/sh\nexec serve --dspark-spec 1 --dspark-draft "%s" --dflash-prec bf16 "$@"\n' "$D2" >"$P/on"
	chmod +x "$P/on"
	SERVE=$P/on start_serve MEMRA_MODELS="q=$A" MEMRA_MAX_SESSIONS=1 MEMRA_DFLASH_PREC=q8
	grep -qx "\[dspark\] q: DFlash2 drafter $D2: 2 layers, block 8, taps \[2,5\], window 16, weights BF16" "$LOG"
	grep -qx '\[dspark\] q: precision bf16 (MEMRA_DFLASH_PREC)' "$LOG"
}

# The cookbook's Gemma-4 31B block with the fixtures' paths: g4-vision (g4-dense's text shape,
# with a tower and a chat template) drafted by g4-assistant, MEMRA_CTX and
# MEMRA_PREFIX_CACHE_MB sized for the CPU (262144 x 16 sessions would take ~10 GiB here).
@test "the cookbook's Gemma-4 block (drafter, ranks, TRIM_ADAPT=512, vision) boots unchanged: its proof lines, every reply plain's, the drain keeps what it learned" {
	need_py openai
	V=$G/g4-vision
	reqs gemma31 10 0.1 "hello world, the quick brown fox jumps over the lazy dog again and again" \
	    "once upon a time there was a tiny model that drafted its own tokens" >"$P/q.jsonl"
	plain_replies "$P/q.jsonl" MEMRA_MODELS="gemma31=$V"
	start_serve MEMRA_MODELS="gemma31=$V" MEMRA_GEMMA_VISION=1 MEMRA_GEMMA_MMPROJ="$V/mmproj-f32.gguf" \
	    MEMRA_SPEC_K=0
	img=$(python3 "$TOP/t/serve-vision.py" "$URL" chat gemma31 12 "@$V/images/a.png" "What is this?")
	stop_serve
	seq 0 255 >"$P/ranks.txt"
	start_serve memra-server MEMRA_COMPAT=openai MEMRA_MODELS="gemma31=$V" \
	    MEMRA_DRAFT="$G/g4-assistant" MEMRA_GEMMA_DRAFT_RANKS="$P/ranks.txt" MEMRA_GEMMA_TRIM_ADAPT=512 \
	    MEMRA_GEMMA_VISION=1 MEMRA_GEMMA_MMPROJ="$V/mmproj-f32.gguf" MEMRA_CTX=4096 \
	    MEMRA_MAX_SESSIONS=16 MEMRA_PREFIX_CACHE_MB=64
	grep -qx "\[gemma-draft\] assistant drafter: 3 layers, hidden 24 over the trunk's K/V, head trimmed to 256 rows (F32, d2t map)" "$LOG"
	grep -qxF "[gemma-draft] trim adapt: 64 learned slots after the 256 ranks (all the tokens outside them), none learned yet (no $P/ranks.txt.learned); the full head's 320 rows stay in memory for them (F32, 0.03 MiB), the slots' rows 0.01 MiB" "$LOG"
	grep -qx '\[model\] gemma31: ctx=4096 K=3 (assistant speculative decode for greedy requests)' "$LOG"
	grep -q '^\[vision\] gemma4 tower: 2 layers, hidden 32, ' "$LOG"
	grep -q '^\[sched\] gemma31: 16 sessions x ctx 4096: ' "$LOG"
	grep -q '^\[sched\] gemma31: prefix cache: 64 MiB, ' "$LOG"
	run -0 $SC "$URL" staggered "$P/q.jsonl"
	diff "$P/plain" - <<<"$output"
	run -0 python3 "$TOP/t/serve-vision.py" "$URL" chat gemma31 12 "@$V/images/a.png" "What is this?"
	[ "$output" = "$img" ]
	[ "$(metric memra_spec_rounds_total)" -gt 0 ]
	stop_serve	# SIGTERM: the drain writes the slots
	grep -q "^\[gemma-draft\] gemma31: trim adapt: [1-9][0-9]* learned slots written to $P/ranks.txt.learned\$" "$LOG"
	[ "$(tail -1 "$LOG")" = "[serve] drained: exiting" ]
	# what it learned: tokens the ranks miss, once each, with their counts
	awk '$1 < 256 || $2 < 1 || seen[$1]++ { exit 1 }' "$P/ranks.txt.learned"
	[ -s "$P/ranks.txt.learned" ]
	start_serve MEMRA_MODELS="gemma31=$V" MEMRA_DRAFT="$G/g4-assistant" \
	    MEMRA_GEMMA_DRAFT_RANKS="$P/ranks.txt" MEMRA_GEMMA_TRIM_ADAPT=512 MEMRA_MAX_SESSIONS=2
	grep -q "^\[gemma-draft\] trim adapt: 64 learned slots after the 256 ranks (all the tokens outside them), $(wc -l <"$P/ranks.txt.learned") from $P/ranks.txt.learned; " "$LOG"
}

# ids_of FILE: the token ids the target says to the requests of FILE (run-gen, greedy)
ids_of() {
	jq -c '{prompt}' "$1" | run-gen -t 2 --jsonl --ids --ignore-eos -n 24 "$G/g4-dense" 2>/dev/null |
	    jq -r '.ids[]'
}

@test "Gemma-4 assistant with MEMRA_GEMMA_TRIM_ADAPT: the slots learn what the ranks miss, drafts land, replies stay plain's" {
	# token-id prompts, greedy, one at a time, K pinned: every count here is fixed
	for i in 0 1 2 3 4 5; do
		printf '{"model": "g", "prompt": [%s], "max_tokens": 24, "temperature": 0, "ignore_eos": true}\n' \
		    "$(seq -s, $((3 + 7 * i)) $((12 + 9 * i)))"
	done >"$P/q"
	ids_of "$P/q" >"$P/all"
	[ "$(wc -l <"$P/all")" = 144 ]
	sort -n -u "$P/all" >"$P/said"
	seq 0 319 | grep -vxFf "$P/said" >"$P/r.txt"	# ranks that miss every token said
	for cfg in "0 0" "3 0" "3 128"; do
		set -- $cfg
		start_serve MEMRA_MODELS="g=$G/g4-dense" MEMRA_DRAFT="$G/g4-assistant" MEMRA_SPEC_K=$1 \
		    MEMRA_GEMMA_DRAFT_RANKS="$P/r.txt" MEMRA_GEMMA_TRIM_ADAPT=$2 MEMRA_MAX_SESSIONS=2
		while read -r q; do
			curl -s "$URL/v1/completions" -d "$q" | jq -c '[.choices[0].text, .usage.completion_tokens]'
		done <"$P/q" >"$P/replies.$1.$2"
		echo "$(metric memra_spec_drafted_tokens_total) $(metric memra_spec_accepted_tokens_total)" >"$P/acc.$1.$2"
		stop_serve
	done
	[ "$(grep -c ',24\]$' "$P/replies.0.0")" = 6 ]
	cmp "$P/replies.0.0" "$P/replies.3.0"
	cmp "$P/replies.0.0" "$P/replies.3.128"
	read -r d0 a0 <"$P/acc.3.0"
	read -r d1 a1 <"$P/acc.3.128"
	[ "$d0" -gt 0 ]	# the ranks alone: no draft lands
	[ "$a0" = 0 ]
	[ "$d1" -gt 0 ]
	[ "$a1" -gt 0 ]
	n=$(wc -l <"$P/said")
	grep -qxF "[gemma-draft] trim adapt: $n learned slots after the $((320 - n)) ranks (all the tokens outside them), none learned yet (no $P/r.txt.learned); the full head's 320 rows stay in memory for them (F32, 0.03 MiB), the slots' rows 0.01 MiB" "$LOG"
	grep -qxF "[gemma-draft] g: trim adapt: $n learned slots written to $P/r.txt.learned" "$LOG"
	# the file: every token said with its count, strongest first
	sort -n "$P/all" | uniq -c | awk '{ print $2, $1 }' | sort -k2,2nr -k1,1n | diff - "$P/r.txt.learned"
}

@test "Gemma-4 assistant with MEMRA_GEMMA_TRIM_ADAPT: an unwritable directory is said once and the server goes on" {
	seq 0 99 >"$P/r.txt"
	# /dev/fd: a directory no one can make a file in, root included
	start_serve MEMRA_MODELS="g=$G/g4-dense" MEMRA_DRAFT="$G/g4-assistant" MEMRA_SPEC_K=3 \
	    MEMRA_GEMMA_DRAFT_RANKS=/dev/fd/3 MEMRA_GEMMA_TRIM_ADAPT=16 3<"$P/r.txt"
	grep -q '^\[gemma-draft\] trim adapt: 16 learned slots after the 100 ranks, none learned yet (no /dev/fd/3.learned); ' "$LOG"
	r=$(curl -s "$URL/v1/completions" -d '{"model": "g", "prompt": [5, 17, 250, 3], "max_tokens": 16, "temperature": 0}')
	[ "$(jq .usage.completion_tokens <<<"$r")" -gt 0 ]
	stop_serve
	[ "$(grep -c 'learned slots not saved' "$LOG")" = 1 ]
	grep -qx "serve: g: MEMRA_GEMMA_TRIM_ADAPT: learned slots not saved: /dev/fd/3.learned: No such file or directory (said once; the drafts go on with them)" "$LOG"
	[ "$(tail -1 "$LOG")" = "[serve] drained: exiting" ]
}

# bats test_tags=gpu
@test "on the CUDA backend: the assistant's and the DFlash2 drafter's replies beside each other are the plain ones" {
	A=$(model_a)
	dev=${DRAFT_TEST_DEVICE:-cuda}
	printf '#!/bin/sh\nexec serve "$@" --device %s\n' "$dev" >"$P/dev" && chmod +x "$P/dev"
	for i in $(seq 0 7); do
		printf '{"model": "g", "prompt": [%s], "max_tokens": %d, "temperature": 0}\n' \
		    "$(seq -s, $((2 + i)) $((20 + 9 * i)))" $((8 + 3 * i))
	done >"$P/q"
	for k in 0 3; do
		SERVE=$P/dev start_serve MEMRA_MODELS="g=$G/g4-dense" \
		    MEMRA_DRAFT="$G/g4-assistant" MEMRA_SPEC_K=$k MEMRA_MAX_SESSIONS=8
		pids= n=0
		while read -r q; do	# all at once, a little apart
			(sleep "0.0$n"; curl -s "$URL/v1/completions" -d "$q" | jq -c '.choices[0].text' >"$P/k$k.$n") &
			pids="$pids $!" n=$((n + 1))
		done <"$P/q"
		wait $pids
		[ "$k" = 0 ] || [ "$(metric memra_spec_rounds_total)" -gt 0 ]
		stop_serve
	done
	for n in $(seq 0 7); do
		[ -s "$P/k0.$n" ]
		cmp "$P/k0.$n" "$P/k3.$n"
	done
	# the DFlash2 drafter on the device: staggered requests get the device's plain replies
	need_py openai
	printf '286\n11\n15\n72\n6043\n604\n519\n43\n' >"$P/r8.txt"
	reqs q38 8 0.15 "def fibonacci(n):" "Once upon a time, in a land far away" >"$P/q.jsonl"
	SERVE=$P/dev plain_replies "$P/q.jsonl" MEMRA_MODELS="q38=$A"
	SERVE=$P/dev start_serve MEMRA_MODELS="q38=$A" MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT="$D2" \
	    MEMRA_FRSPEC_TRIM="$P/r8.txt" MEMRA_MAX_SESSIONS=8 MEMRA_SPEC_K=7
	run -0 $SC "$URL" staggered "$P/q.jsonl"
	diff "$P/plain" - <<<"$output"
	[ "$(metric memra_spec_rounds_total)" -gt 0 ]
}
