bats_require_minimum_version 1.5.0

# serve's prefix cache (MEMRA_PREFIX_CACHE_MB) and reuse pool (MEMRA_REUSE_POOL)
# over HTTP with the openai client: every reply the one both off give.

setup() {
	load helper
	load serve
	P=$BATS_TEST_TMPDIR
	SPID=
}

teardown() { serve_teardown; }



# conversation NAME [VAR=VALUE...]: 8 turns on model A (prompt chunks of 32
# tokens, so that short turns pass chunk boundaries, unless VAR=VALUE sets
# MEMRA_PREFILL_CHUNK) into $P/NAME.jsonl
conversation() {
	local name=$1
	shift
	start_serve MEMRA_MODELS="a=$A" MEMRA_PREFILL_CHUNK=32 "$@"
	python3 "$TOP/t/serve-conv.py" "$URL" a 8 12 >"$P/$name.jsonl"
	curl -s "$URL/metrics" >"$P/$name.metrics"
	stop_serve
	cp "$LOG" "$P/$name.log"
	[ "$(wc -l <"$P/$name.jsonl")" = 8 ]
	jq -r .content "$P/$name.jsonl" >"$P/$name.txt"
}

# id_turns NAME [VAR=VALUE...]: 8 turns of token ids on model $A: a prompt of 60
# ids, then each turn's the last one, its reply's 40 ids (ignore_eos) and 40
# more; each turn's reply ids, prompt_tokens and cached_tokens a line of
# $P/NAME.jsonl
id_turns() {
	local name=$1 p t body
	shift
	start_serve MEMRA_MODELS="a=$A" "$@"
	p=$(jq -nc '[range(60) | (. * 37 + 11) % 200]')
	: >"$P/$name.jsonl"
	for t in 1 2 3 4 5 6 7 8; do
		run -0 http POST /v1/completions '{"prompt": '"$p"', "max_tokens": 40, "temperature": 0, "ignore_eos": true, "return_token_ids": true}' -H 'Content-Type: application/json'
		[[ $output == "200 "* ]]
		body=${output#200 }
		jq -c '{ids: .choices[0].token_ids, prompt_tokens: .usage.prompt_tokens, cached_tokens: .usage.prompt_tokens_details.cached_tokens}' <<<"$body" >>"$P/$name.jsonl"
		p=$(jq -c --argjson a "$p" --argjson t "$t" '$a + .choices[0].token_ids + [range(40) | (. * 13 + $t * 7) % 200]' <<<"$body")
	done
	stop_serve
	cp "$LOG" "$P/$name.log"
}

# cached NAME: the turns' cached_tokens, one line
cached() { jq -r .cached_tokens "$P/$1.jsonl" | tr '\n' ' '; }

@test "bad values of the knobs are usage errors" {
	run -2 --separate-stderr env MEMRA_MODELS=x=y MEMRA_PREFIX_CACHE_MB=lots serve
	[ "$stderr" = "serve: MEMRA_PREFIX_CACHE_MB (--prefix-cache-mb): 'lots': out of range 0..1073741824 or not a number" ]
	run -2 --separate-stderr env MEMRA_MODELS=x=y MEMRA_REUSE_POOL=2 serve
	[ "$stderr" = "serve: MEMRA_REUSE_POOL (--reuse-pool): '2': out of range 0..1 or not a number" ]
	run -2 --separate-stderr env MEMRA_MODELS=x=y serve --reuse-pool yes
	[[ $stderr == "serve: MEMRA_REUSE_POOL (--reuse-pool): 'yes': out of range"* ]]
	run -2 --separate-stderr env MEMRA_MODELS=x=y MEMRA_PREFIX_BLOCK=100 serve
	[ "$stderr" = "serve: MEMRA_PREFIX_BLOCK (--prefix-block): 100: not a multiple of 64 that divides the prefill chunk of 512 (MEMRA_PREFILL_CHUNK), nor the chunk" ]
	run -2 --separate-stderr env MEMRA_MODELS=x=y MEMRA_PREFILL_CHUNK=192 serve --prefix-block 128
	[ "$stderr" = "serve: MEMRA_PREFIX_BLOCK (--prefix-block): 128: not a multiple of 64 that divides the prefill chunk of 192 (MEMRA_PREFILL_CHUNK), nor the chunk" ]
	run -2 --separate-stderr env MEMRA_MODELS=x=y MEMRA_PREFILL_CHUNK=32 serve --prefix-block 64
	[[ $stderr == "serve: MEMRA_PREFIX_BLOCK (--prefix-block): 64: not a multiple of 64 that divides the prefill chunk of 32 "* ]]
	run -2 --separate-stderr env MEMRA_MODELS=x=y serve --prefix-block 0
	[[ $stderr == "serve: MEMRA_PREFIX_BLOCK (--prefix-block): '0': out of range 1..1048576"* ]]
}

@test "model A: chunks of 512, blocks of 64: short turns resume at their last block, the replies of both off" {
	need_py openai
	A=$(model_a)
	conversation off MEMRA_PREFILL_CHUNK=512 MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0
	conversation on MEMRA_PREFILL_CHUNK=512
	conversation cache MEMRA_PREFILL_CHUNK=512 MEMRA_REUSE_POOL=0 MEMRA_PREFIX_CACHE_MB=64
	grep -Eq '^\[sched\] a: prefix cache: 6[34] MiB, [0-9]+ blocks of 64 tokens, [0-9.]+ MiB each \(KV rows\), [0-9]+ snapshots, [0-9.]+ MiB each \(the recurrent state where a prefill forward ended: each chunk.s end and each prompt.s last block\)$' "$P/cache.log"
	cmp "$P/off.txt" "$P/on.txt"
	cmp "$P/off.txt" "$P/cache.txt"
	# every prompt under one chunk; from turn 2 on each resumes at least at the
	# last block of 64 of the turn before (main reused nothing under 512)
	jq -e 'select(.prompt_tokens >= 512)' "$P/on.jsonl" && false
	for f in on cache; do
		jq -e 'select(.cached_tokens % 64 != 0 or .cached_tokens >= .prompt_tokens)' "$P/$f.jsonl" && false
		jq -s -e '[range(1; length) as $t | .[$t].cached_tokens >= ((.[$t - 1].prompt_tokens - 1) / 64 | floor) * 64] | all' "$P/$f.jsonl"
		[ "$(jq -r .cached_tokens "$P/$f.jsonl" | sed -n 2p)" -gt 0 ]
	done
	grep -Eqx 'memra_prefix_cache_snapshots\{model="a"\} [1-9][0-9]*' "$P/cache.metrics"
	grep -Eqx 'memra_prefix_cache_blocks\{model="a"\} [1-9][0-9]*' "$P/cache.metrics"
}

@test "model A: 8 turns from the pool and the cache are the replies of both off; the reuse line; cached_tokens" {
	need_py openai
	A=$(model_a)
	conversation off MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0 MEMRA_SPEC_K=0
	grep -q '^\[sched\] a: prefix cache: off (MEMRA_PREFIX_CACHE_MB=0)$' "$P/off.log"
	grep -q '^\[sched\] reuse pool: off (MEMRA_REUSE_POOL=0)$' "$P/off.log"
	[ "$(cached off)" = "0 0 0 0 0 0 0 0 " ]
	! grep -q 'reuse:' "$P/off.log" || false
	conversation on
	grep -Eq '^\[sched\] a: prefix cache: [0-9]+ MiB \(a quarter of the memory the sessions leave' "$P/on.log"
	grep -q '^\[sched\] reuse pool: on' "$P/on.log"
	cmp "$P/off.txt" "$P/on.txt"
	grep -Eq '^\[worker\] a: reuse: [1-9][0-9]* committed tokens resumed' "$P/on.log"
	jq -e 'select(.cached_tokens > 0)' "$P/on.jsonl" >/dev/null
	[ "$(jq -r .cached_tokens "$P/on.jsonl" | tail -1)" -gt 0 ]
	# /metrics: the cached tokens the replies told, the pool's resumes, the cache's size
	sum=$(jq -s 'map(.cached_tokens) | add' "$P/on.jsonl")
	grep -qx "memra_cached_tokens_total{model=\"a\"} $sum" "$P/on.metrics"
	grep -qx 'memra_cached_tokens_total{model="a"} 0' "$P/off.metrics"
	grep -Eqx 'memra_reuse_pool_resumed_total [1-9][0-9]*' "$P/on.metrics"
	grep -Eqx 'memra_prefix_cache_budget_bytes\{model="a"\} [1-9][0-9.e+]*' "$P/on.metrics"
	! grep -q '^memra_prefix_cache_budget_bytes' "$P/off.metrics" || false
	jq -e 'select(.cached_tokens % 32 != 0 or .cached_tokens >= .prompt_tokens)' "$P/on.jsonl" && false
	true
}

@test "gemma4 over rings: 8 turns past its sliding layers' rings from the pool and the cache are the replies of both off" {
	A=$TOP/t/data/gemma4/g4-dense
	id_turns off MEMRA_CTX=2048 MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0
	grep -qx "\[sched\] a: 3 of 5 KV caches (the sliding layers') rings of 516 positions (window 5 + 512 rows a piece - 1), the rest ctx; a conversation resumes from the pool within 512 positions of where it parked" "$P/off.log"
	# the last turns' prompts run past the rings' 516 rows
	[ "$(jq -r .prompt_tokens "$P/off.jsonl" | tail -1)" = 620 ]
	id_turns pool MEMRA_CTX=2048 MEMRA_PREFIX_CACHE_MB=0
	cmp <(jq -c .ids "$P/off.jsonl") <(jq -c .ids "$P/pool.jsonl")
	grep -Eq '^\[worker\] a: reuse: [1-9][0-9]* committed tokens resumed' "$P/pool.log"
	# each turn resumes where the turn before's prefill passed its last block of 64
	[ "$(cached pool)" = "0 0 128 192 256 320 448 512 " ]
	id_turns cache MEMRA_CTX=2048 MEMRA_REUSE_POOL=0 MEMRA_PREFIX_CACHE_MB=16
	cmp <(jq -c .ids "$P/off.jsonl") <(jq -c .ids "$P/cache.jsonl")
	[ "$(cached cache)" = "0 0 128 192 256 320 448 512 " ]
}

@test "model A: each knob turns its part off, the other still reuses exactly" {
	need_py openai
	A=$(model_a)
	conversation off MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0
	conversation pool MEMRA_PREFIX_CACHE_MB=0
	grep -q '^\[sched\] a: prefix cache: off (MEMRA_PREFIX_CACHE_MB=0)$' "$P/pool.log"
	cmp "$P/off.txt" "$P/pool.txt"
	grep -Eq '^\[worker\] a: reuse: [1-9][0-9]* committed tokens resumed' "$P/pool.log"
	[ "$(jq -r .cached_tokens "$P/pool.jsonl" | tail -1)" -gt 0 ]
	conversation cache MEMRA_REUSE_POOL=0 MEMRA_PREFIX_CACHE_MB=64
	grep -Eq '^\[sched\] a: prefix cache: 64 MiB, [0-9]+ blocks of 32 tokens' "$P/cache.log"
	grep -q '^\[sched\] reuse pool: off (MEMRA_REUSE_POOL=0)$' "$P/cache.log"
	cmp "$P/off.txt" "$P/cache.txt"
	! grep -q 'reuse:' "$P/cache.log" || false
	[ "$(jq -r .cached_tokens "$P/cache.jsonl" | tail -1)" -gt 0 ]
}

@test "serve(1) documents MEMRA_PREFIX_BLOCK in --help, OPTIONS and ENVIRONMENT, and the boot line's blocks and snapshots" {
	command -v mandoc >/dev/null || skip "mandoc not installed"
	man=$(mandoc -Tascii "$TOP/man/serve.1" | sed 's/.\x08//g')
	serve --help | grep -q '(MEMRA_PREFIX_BLOCK, 64;'
	serve --help | grep -q 'the chunk where 64 does not divide it, and on cuda)'
	serve --help | grep -q -- '^  --prefix-block N '
	sed -n '/^OPTIONS/,/^ENVIRONMENT/p' <<<"$man" | grep -q -- '--prefix-block'
	sed -n '/^ENVIRONMENT/,/^EXIT STATUS/p' <<<"$man" | grep -q 'MEMRA_PREFIX_BLOCK'
	sed -n '/^DESCRIPTION/,/^OPTIONS/p' <<<"$man" | tr -s ' \n' ' ' | grep -q 'blocks of 64 tokens, 0.19 MiB each (KV rows), 652 snapshots'
}

# bats test_tags=gpu
@test "on cuda the prefix block is the chunk (a resume inside one is not exact there); 64 is refused at boot, by reason" {
	A=$(model_a)
	run -1 --separate-stderr env MEMRA_MODELS="a=$A" MEMRA_PREFIX_BLOCK=64 serve --device cuda
	[[ ${stderr##*$'\n'} == *"a prefix block of 64 tokens on backend 'cuda"*"its prompt rows take other bits when a forward is cut inside a chunk, so a resume there would not be exact; the block must be the chunk of 512 there" ]]
	printf '#!/bin/sh\nexec serve "$@" --device cuda\n' >"$P/dev" && chmod +x "$P/dev"
	SERVE=$P/dev start_serve MEMRA_MODELS="a=$A"
	grep -Eq '^\[sched\] a: prefix cache: [0-9]+ MiB .*, [0-9]+ blocks of 512 tokens' "$LOG"
}

@test "return_token_ids lists each reply's ids (whole, or chunk by chunk when streamed), so that a client can send a next turn of prompt + reply ids + more by ids; it resumes from the parked state at the prompt's last block" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_PREFILL_CHUNK=32
	p=$(jq -nc '[range(40) | (. * 37 + 11) % 8000]')	# past the block of 32: parked
	run -0 http POST /v1/completions '{"prompt": '"$p"', "max_tokens": 30, "temperature": 0, "ignore_eos": true, "return_token_ids": true}' -H 'Content-Type: application/json'
	[[ $output == "200 "* ]]
	body=${output#200 }
	ids=$(jq -c '.choices[0].token_ids' <<<"$body")
	[ "$(jq 'length' <<<"$ids")" = 30 ]
	[ "$(jq -r .usage.completion_tokens <<<"$body")" = 30 ]
	# streamed: the chunks' ids together are the same ids
	run -0 curl -s -N "$URL/v1/completions" -H 'Content-Type: application/json' \
	    -d '{"prompt": '"$p"', "max_tokens": 30, "temperature": 0, "ignore_eos": true, "return_token_ids": true, "stream": true}'
	[ "$(sed -n 's/^data: \({.*\)/\1/p' <<<"$output" | jq -c '.choices[0].token_ids // empty' | jq -s -c add)" = "$ids" ]
	# the next turn: the reply's ids and two more after the prompt; it resumes where the
	# parked conversation's prefill passed its last block boundary (32): the replies'
	# decode steps leave no state a cold prefill would make bit for bit
	next=$(jq -c --argjson a "$p" '$a + . + [25, 26]' <<<"$ids")
	run -0 http POST /v1/completions '{"prompt": '"$next"', "max_tokens": 4, "temperature": 0}' -H 'Content-Type: application/json'
	[[ $output == "200 "* ]]
	[ "$(jq -r .usage.prompt_tokens_details.cached_tokens <<<"${output#200 }")" = 32 ]
	grep -q '^\[worker\] a: reuse: 32 committed tokens resumed (of 70 parked' "$LOG"
	# without it: no token_ids; a non-boolean: refused by name
	run -0 http POST /v1/completions '{"prompt": '"$p"', "max_tokens": 2}' -H 'Content-Type: application/json'
	[ "$(jq -c '.choices[0].token_ids' <<<"${output#200 }")" = null ]
	run -0 http POST /v1/completions '{"prompt": '"$p"', "max_tokens": 2, "return_token_ids": "yes"}' -H 'Content-Type: application/json'
	[[ $output == "400 "*"'return_token_ids': not a boolean"* ]]
}
