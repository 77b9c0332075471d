bats_require_minimum_version 1.5.0

setup() {
	load helper
	load serve
	P=$BATS_TEST_TMPDIR
	SC="python3 $TOP/t/serve-client.py"
	SPID=
}

teardown() { serve_teardown; }



@test "usage: --help matches the man page, a bad setting is misuse" {
	run -0 serve --help
	[[ ${lines[0]} == "usage: serve [--models spec] [--host H] [--port P]"* ]]
	if command -v mandoc >/dev/null; then
		syn=$(mandoc -Tascii "$TOP/man/serve.1" | sed 's/.\x08//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
		    sed '1d;$d' | tr -s ' \n\t' ' ')
		use=$(serve --help | sed -n '/^usage: /,/^  -/p' | sed '$d' | sed 's/^usage: //' | tr -s ' \n\t' ' ')
		[ "$syn" = " $use" ]
	fi
	run -2 --separate-stderr serve --bogus
	run -2 --separate-stderr env -u MEMRA_MODELS serve
	[ "$stderr" = "serve: no model: set MEMRA_MODELS or --models (name=spec[+draft],...)" ]
	run -2 --separate-stderr env MEMRA_MODELS=x=y MEMRA_CTX=abc serve
	[ "$stderr" = "serve: MEMRA_CTX (--ctx): 'abc': out of range 16..16777216 or not a number" ]
	run -2 --separate-stderr env MEMRA_MODELS=x=y serve --max-sessions 0
	[[ $stderr == "serve: MEMRA_MAX_SESSIONS (--max-sessions): '0': out of range"* ]]
	run -2 --separate-stderr env MEMRA_MODELS=x=y MEMRA_COMPAT=vllm serve
	[ "$stderr" = "serve: MEMRA_COMPAT: 'vllm': only 'openai' is supported" ]
}

@test "cookbook variables serve does not implement are refused at boot, by name" {
	for v in MEMRA_DSPARK_OTHER=1 MEMRA_GEMMA_OTHER=1 MEMRA_PP_OTHER=2 MEMRA_VISION_DIR=d; do
		run -2 --separate-stderr env "$v" MEMRA_MODELS=x=y serve
		[ "$stderr" = "serve: ${v%%=*}: not supported by this server (refusing to run a different configuration)" ]
	done
	run -1 --separate-stderr env MEMRA_MODELS=x=/nonexistent serve
	[[ $stderr == *"serve: /nonexistent: No such file or directory" ]]
}

@test "SmolLM2: models, chat, stream and completions at temperature 0 equal run-gen" {
	need_py openai
	S=$(smollm2)
	start_serve MEMRA_MODELS="s=$S"
	grep -q "^\[model\] s: $S\$" "$LOG"
	grep -q '^\[model\] s: ctx=4096 K=0 (plain decode)$' "$LOG"
	grep -q '^\[serve\] device cpu' "$LOG"
	run -0 $SC "$URL" models
	[ "$output" = s ]
	want=$(run-gen -n 20 --device cpu "$S" "What is the capital of France?" 2>/dev/null)
	chat=$want
	run -0 $SC "$URL" chat s "What is the capital of France?" 20
	[ "$(jq -r .content <<<"$output")" = "$want" ]
	[ "$(jq -r .finish <<<"$output")" = length ]
	[ "$(jq -r .completion_tokens <<<"$output")" = 20 ]
	[ "$(jq -r .prompt_tokens <<<"$output")" -gt 5 ]
	run -0 $SC "$URL" chat-stream s "What is the capital of France?" 20
	[ "$(jq -r .content <<<"$output")" = "$want" ]
	[ "$(jq -r .finish <<<"$output")" = length ]
	want=$(run-gen --raw -n 12 --device cpu "$S" "The capital of France is" 2>/dev/null)
	run -0 $SC "$URL" complete s "The capital of France is" 12
	[ "$(jq -r .text <<<"$output")" = "$want" ]
	# a stop string cuts the text before it, finish "stop"
	run -0 $SC "$URL" chat s "What is the capital of France?" 20 '{"stop": ["Marseillaise"]}'
	[[ $chat == *Marseillaise* ]]
	[ "$(jq -r .content <<<"$output")" = "${chat%%Marseillaise*}" ]
	[ "$(jq -r .finish <<<"$output")" = stop ]
	run -0 $SC "$URL" chat-stream s "What is the capital of France?" 20 '{"stop": "Marseillaise"}'
	[ "$(jq -r .content <<<"$output")" = "${chat%%Marseillaise*}" ]
	[ "$(jq -r .finish <<<"$output")" = stop ]
}

@test "SmolLM2: errors are JSON with the right status" {
	need_py openai
	start_serve MEMRA_MODELS="s=$(smollm2)" MEMRA_CTX=64
	run -0 http POST /v1/chat/completions '{bad'
	[[ $output == '400 {"error": {"message": "line 1 column 2: '*'"type": "invalid_request_error", "code": 400}}' ]]
	run -0 $SC "$URL" chat nosuch hi 3
	[ "$output" = "error 404 model 'nosuch': not served here" ]
	run -0 $SC "$URL" chat s "$(printf 'word %.0s' $(seq 100))" 3
	[[ $output == "error 400 prompt of "*" tokens: does not fit in the context of 64" ]]
	run -0 $SC "$URL" chat s hi 3 '{"n": 5}'
	[ "$output" = "error 400 'n': 5: more than the 4 sessions this server runs at once" ]
	run -0 http GET /v1/chat/completions
	[[ $output == '405 {"error": {"message": "method not allowed: use POST"'* ]]
	run -0 http POST /v1/models '{}'
	[[ $output == '405 '* ]]
	run -0 http GET /nope
	[[ $output == '404 {"error": {"message": "no such endpoint"'* ]]
	run -0 http POST /v1/completions '{"model": "s", "prompt": 3}'
	[[ $output == "400 {\"error\": {\"message\": \"'prompt': a string or an array of token ids is required\""* ]]
	run -0 http POST /v1/completions '{}' -H 'Transfer-Encoding: chunked'
	[[ $output == '411 {"error": {"message": "chunked request bodies are not supported'* ]]
	run -0 http POST /v1/completions '{"prompt": "hi", "top_k": -3}'
	[[ $output == "400 {\"error\": {\"message\": \"'top_k': -3: out of range 0..1073741824\""* ]]
	run -0 http POST /v1/completions '{"prompt": "hi", "temperature": -1}'
	[[ $output == "400 {\"error\": {\"message\": \"'temperature': -1: out of range 0..2\""* ]]
	run -0 http GET /health
	[ "$output" = '200 {"status": "ok"}' ]
}

@test "SmolLM2: a seeded sampled request is reproducible" {
	start_serve MEMRA_MODELS="s=$(smollm2)"
	q='{"prompt": "Once upon a time", "temperature": 0.9, "seed": 7, "max_tokens": 12}'
	run -0 http POST /v1/completions "$q"
	one=$(jq -r '.choices[0].text' "$P/body")
	[ -n "$one" ]
	run -0 http POST /v1/completions "$q"
	[ "$(jq -r '.choices[0].text' "$P/body")" = "$one" ]
}

@test "API key: Bearer auth on /v1, a wrong or missing key is 401" {
	need_py openai
	start_serve MEMRA_MODELS="s=$(smollm2)" MEMRA_API_KEY=sekret
	run -0 $SC "$URL" models
	[ "$output" = "error 401 invalid or missing API key" ]
	run -0 $SC "$URL" --key sekret models
	[ "$output" = s ]
	run -0 http GET /v1/models
	[[ $output == '401 '* ]]
	run -0 http GET /v1/models '' -H 'Authorization: Bearer sekret'
	[[ $output == '200 {"object": "list"'* ]]
}

@test "four clients at once all get the sequential answer; beyond MEMRA_MAX_SESSIONS is 503" {
	need_py openai
	start_serve MEMRA_MODELS="s=$(smollm2)" MEMRA_MAX_SESSIONS=4
	one=$($SC "$URL" chat s "What is 2+2?" 16 | jq .content)
	run -0 $SC "$URL" parallel 4 s "What is 2+2?" 16
	[ "${#lines[@]}" = 4 ]
	for l in "${lines[@]}"; do [ "$l" = "$one" ]; done
	kill "$SPID"; wait "$SPID" 2>/dev/null || true
	start_serve MEMRA_MODELS="s=$(smollm2)" MEMRA_MAX_SESSIONS=1 MEMRA_QUEUE=0
	run -0 $SC "$URL" parallel 3 s "Write a long story about a cat." 200
	[[ $output == *'"error 503"'* ]]
	[[ $output == *'"'[A-Za-z]* ]]
}

@test "model A: greedy through HTTP is token-identical with MEMRA_SPEC_K=0 and K=3" {
	need_py openai
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0
	grep -q '^\[model\] a: ctx=4096 K=0 (plain decode)$' "$LOG"
	for i in 1 2 3; do
		p=$(sed -n "${i}p" "$A/prompts.jsonl" | jq -r .prompt)
		$SC "$URL" complete a "$p" 24 >>"$P/k0"
	done
	want=$(run-gen --raw -n 24 --device cpu "$A" "$(sed -n 1p "$A/prompts.jsonl" | jq -r .prompt)" 2>/dev/null)
	kill "$SPID"; wait "$SPID" 2>/dev/null || true
	start_serve MEMRA_MODELS="a=$A"
	grep -q '^\[model\] a: ctx=4096 K=3 (MTP speculative decode for greedy requests)$' "$LOG"
	for i in 1 2 3; do
		p=$(sed -n "${i}p" "$A/prompts.jsonl" | jq -r .prompt)
		$SC "$URL" complete a "$p" 24 >>"$P/k3"
	done
	cmp "$P/k0" "$P/k3"
	[ "$(head -1 "$P/k3" | jq -r .text)" = "$want" ]
	[ "$(wc -l <"$P/k3")" = 3 ]
}

@test "model A with a test template: tools reach the template, <think> becomes reasoning_content" {
	need_py openai
	model_a_template '{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if tools %}<tools>{{ tools | tojson }}</tools>
{% endif %}<|im_start|>assistant
{% if enable_thinking %}<think>
{% endif %}'
	start_serve MEMRA_MODELS="a=$P/a"
	tools='"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]'
	run -0 $SC "$URL" chat a "def f(x):" 8
	plain=$(jq .prompt_tokens <<<"$output")
	[ "$(jq -r .reasoning <<<"$output")" = null ]
	run -0 $SC "$URL" chat a "def f(x):" 8 "{$tools}"
	[ "$(jq .prompt_tokens <<<"$output")" -gt "$plain" ]
	run -0 $SC "$URL" chat a "def f(x):" 8 "{$tools, \"tool_choice\": \"none\"}"
	[ "$(jq .prompt_tokens <<<"$output")" = "$plain" ]
	run -0 $SC "$URL" chat a "def f(x):" 8 '{"extra_body": {"chat_template_kwargs": {"enable_thinking": true}}}'
	[ "$(jq .prompt_tokens <<<"$output")" -gt "$plain" ]
	[ "$(jq -r .reasoning <<<"$output")" != null ]
	[ "$(jq -r .content <<<"$output")" = "" ]
}

@test "a cookbook serving block runs unchanged as memra-server: +draft and the trim line at boot" {
	need_py openai
	A=$(model_a)
	quant-nvfp4 -t 1 --type Q8_0 "$A" "$P/a.gguf" 2>/dev/null
	seq 0 511 >"$P/r.txt"
	trim-head "$P/a.gguf" "$P/r.txt" "$P/d.gguf" 2>/dev/null
	start_serve memra-server MEMRA_COMPAT=openai MEMRA_MODELS="q=$P/a.gguf+$P/d.gguf" MEMRA_CTX=2048 MEMRA_MAX_SESSIONS=2
	grep -q "^\[mtp-draft\] loading external MTP draft: $P/d.gguf\$" "$LOG"
	grep -q '^\[mtp-draft\] external draft head: blk\.[0-9]*, source=output\.weight, head_vocab=512 (trimmed, d2t map)$' "$LOG"
	grep -q "^\[worker\] q: regime draft attached ($P/d.gguf)\$" "$LOG"
	grep -q '^\[model\] q: ctx=2048 K=3 ' "$LOG"
	grep -q '(max sessions 2, compat openai)' "$LOG"
	run -0 $SC "$URL" complete q "def fib(n):" 16
	[ "$(jq -r .finish <<<"$output")" != null ]
	kill "$SPID"; wait "$SPID" 2>/dev/null || true
	start_serve MEMRA_MODELS="q=$P/a.gguf" MEMRA_FRSPEC_TRIM="$P/r.txt"
	grep -q '^\[frspec-trim\] self-trimmed head: 512 rows of main output.weight' "$LOG"
	run -1 grep -q 'regime draft attached' "$LOG"	# a trim of its own head: no draft file
}

@test "a client that drops a stream stops its generation" {
	S=$(smollm2)
	start_serve MEMRA_MODELS="s=$S"
	curl -sN "$URL/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 2000, "stream": true}' |
	    head -c 200 >/dev/null || true
	for _ in $(seq 300); do grep -q '^\[serve\] request 1:' "$LOG" && break; sleep 0.1; done
	run -0 grep '^\[serve\] request 1:' "$LOG"
	[[ $output == *" (client gone)" ]]
	n=$(sed -n 's/.*completion=\([0-9]*\).*/\1/p' <<<"$output")
	[ "$n" -lt 2000 ]
}

# requests A: N completions of model A's held-out prompts (greedy, and every
# third seeded-sampled), arriving DT seconds apart; EXTRA a JSON object merged
# into the one at index DROP (e.g. a stream that hangs up)
requests_a() {
	local n=$1 dt=$2 drop=${3:--1} extra=${4:-'{}'}
	python3 - "$(model_a)/prompts.jsonl" "$n" "$dt" "$drop" "$extra" <<'PY'
import json, sys
src, n, dt, drop, extra = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
ps = [json.loads(l)["prompt"] for l in open(src)]
for i in range(n):
    q = {"model": "a", "prompt": ps[i][: 200 + 97 * i], "max_tokens": 12 + (7 * i) % 20,
         "temperature": 0, "delay": round(dt * i, 2)}
    if i % 3 == 2:
        q.update(temperature=0.8, top_p=0.95, seed=100 + i)
    if i % 4 == 1:
        q["stream"] = True
    if i == drop:
        q.update(extra)
    print(json.dumps(q))
PY
}

@test "16 requests arriving while others run each get their solo reply, speculation on and off" {
	need_py openai
	A=$(model_a)
	requests_a 16 0.15 >"$P/q.jsonl"
	start_serve MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=1 MEMRA_SPEC_K=0
	run -0 $SC "$URL" solo "$P/q.jsonl"
	echo "$output" >"$P/solo"
	[ "$(grep -c '"text"' "$P/solo")" -eq 16 ]
	kill "$SPID"; wait "$SPID" 2>/dev/null || true
	for k in 3 0; do
		start_serve MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=16 MEMRA_SPEC_K=$k MEMRA_PREFILL_CHUNK=64
		run -0 $SC "$URL" staggered "$P/q.jsonl"
		diff "$P/solo" - <<<"$output"
		grep -q "^\[model\] a: ctx=4096 K=$k " "$LOG"
		kill "$SPID"; wait "$SPID" 2>/dev/null || true
	done
}

@test "a client that hangs up mid-stream leaves the other replies intact" {
	need_py openai
	A=$(model_a)
	requests_a 6 0.1 >"$P/q.jsonl"
	requests_a 6 0.1 2 '{"stream": true, "max_tokens": 400, "drop_after": 3}' >"$P/qd.jsonl"
	start_serve MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=1
	$SC "$URL" solo "$P/q.jsonl" >"$P/solo"
	kill "$SPID"; wait "$SPID" 2>/dev/null || true
	start_serve MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=6
	run -0 $SC "$URL" staggered "$P/qd.jsonl"
	[ "${lines[2]}" = '{"dropped": true}' ]
	diff <(sed 3d "$P/solo") <(sed 3d <<<"$output")
	for _ in $(seq 100); do grep -q '(client gone)' "$LOG" && break; sleep 0.1; done
	grep -q 'request 3: .*(client gone)$' "$LOG"
}

@test "past the sessions and the queue: 503 with Retry-After; the queue holds what it can" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=1 MEMRA_QUEUE=1 MEMRA_SPEC_K=0
	grep -q '^\[sched\] continuous batching: 1 sessions, queue 1 (then 503)' "$LOG"
	long='{"prompt": "def f(x):", "max_tokens": 3000, "ignore_eos": true, "stream": true}'
	curl -sN "$URL/v1/completions" -d "$long" >"$P/s1" & c1=$!
	for _ in $(seq 100); do grep -q 'data:' "$P/s1" && break; sleep 0.1; done
	curl -sN "$URL/v1/completions" -d "$long" >"$P/s2" & c2=$!	# queued
	sleep 0.5
	run -0 curl -s -i "$URL/v1/completions" -d '{"prompt": "x", "max_tokens": 2}'
	[[ ${lines[0]} == "HTTP/1.1 503 "* ]]
	[[ $output == *$'\r\nRetry-After: 1\r\n'* ]]
	[[ $output == *'"server busy: 1 sessions running and 1 waiting"'* ]]
	kill $c1 $c2 2>/dev/null; wait $c1 $c2 2>/dev/null || true
}

@test "a session budget that cannot fit is a boot error naming what fits" {
	A=$(model_a)
	run -1 env MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=4096 MEMRA_CTX=16777216 serve --device cpu -t 1
	[[ ${lines[-1]} == "serve: a: MEMRA_MAX_SESSIONS x MEMRA_CTX: 4096 sessions of ctx 16777216 need "*" MiB each, "*"at most "* ]]
	start_serve MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=3 MEMRA_CTX=2048
	grep -q '^\[sched\] a: 3 sessions x ctx 2048: [0-9.]* MiB each, [0-9.]* MiB in all ([0-9]* MiB free before; room for [0-9]*)$' "$LOG"
	grep -q '^\[sched\] a: a step of m rows (ms): 1: [0-9.e+-]* 2: [0-9.e+-]* 4: [0-9.e+-]* 8: [0-9.e+-]* 16: [0-9.e+-]* 32: [0-9.e+-]*; a draft [0-9.e+-]* ms$' "$LOG"
	grep -q '^\[sched\] a: speculative K by load, up to 3 (acceptance 0.5 until measured): 1+ sessions K=[0-3]\( [0-9]*+ sessions K=[0-3]\)*$' "$LOG"
	kill "$SPID"; wait "$SPID" 2>/dev/null || true
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=2
	grep -q '^\[sched\] a: speculative K pinned at 2 (MEMRA_SPEC_K)$' "$LOG"
}

@test "completions take token ids; ignore_eos runs to max_tokens" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A"
	ids=$(run-gen --tokenize "$A" 'def fib(n):' | paste -sd, -)
	run -0 http POST /v1/completions '{"prompt": "def fib(n):", "max_tokens": 10, "temperature": 0}'
	text=$(jq -r '.choices[0].text' "$P/body")
	run -0 http POST /v1/completions "{\"prompt\": [$ids], \"max_tokens\": 10, \"temperature\": 0}"
	[ "$(jq -r '.choices[0].text' "$P/body")" = "$text" ]
	[ "$(jq -r '.usage.prompt_tokens' "$P/body")" = 5 ]
	run -0 http POST /v1/completions '{"prompt": [1, 2, 3], "max_tokens": 40, "ignore_eos": true}'
	[ "$(jq -r '.usage.completion_tokens' "$P/body")" = 40 ]
	run -0 http POST /v1/completions '{"prompt": [1, 99999999], "max_tokens": 4}'
	[[ $output == '400 '*'outside the vocabulary'* ]]
	run -0 http POST /v1/completions '{"prompt": "x", "ignore_eos": 3}'
	[[ $output == '400 '*"'ignore_eos': not a boolean"* ]]
}

@test "a client that hangs up while queued gives its place back" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=1 MEMRA_QUEUE=1 MEMRA_SPEC_K=0
	long='{"prompt": "def f(x):", "max_tokens": 3000, "ignore_eos": true, "stream": true}'
	curl -sN "$URL/v1/completions" -d "$long" >"$P/s1" & c1=$!
	for _ in $(seq 100); do grep -q 'data:' "$P/s1" && break; sleep 0.1; done
	curl -sN --max-time 1 "$URL/v1/completions" -d "$long" >/dev/null || true	# queued, then gone
	for _ in $(seq 50); do grep -q '^\[serve\] request 2: .*(client gone)$' "$LOG" && break; sleep 0.1; done
	run -0 grep '^\[serve\] request 2: .* completion=0 queued -1.00 s.*(client gone)$' "$LOG"
	run -28 curl -s -i --max-time 2 "$URL/v1/completions" -d "$long"	# queued in the freed place: a stream that has begun
	[[ ${lines[0]} == "HTTP/1.1 200 "* ]]
	kill $c1 2>/dev/null; wait $c1 2>/dev/null || true
}

@test "a model without a tokenizer serves token-id prompts and answers with token ids" {
	m=$DATA/tiny/q35-r2	# an HF checkpoint without tokenizer.json
	start_serve MEMRA_MODELS="r=$m"
	grep -q '^\[model\] r: ctx=4096 K=0 (plain decode), no tokenizer: token-id prompts only$' "$LOG"
	run -0 http POST /v1/completions '{"prompt": [5, 17, 250], "max_tokens": 6, "ignore_eos": true}'
	[ "$(jq -c '.choices[0].token_ids | length' "$P/body")" = 6 ]
	[ "$(jq -r '.choices[0].text' "$P/body")" = "" ]
	ids=$(jq -c '.choices[0].token_ids' "$P/body")
	curl -sN "$URL/v1/completions" -d '{"prompt": [5, 17, 250], "max_tokens": 6, "ignore_eos": true, "stream": true}' >"$P/s"
	[ "$(grep '"token_ids"' "$P/s" | sed 's/^data: //' | jq -s -c '[.[].choices[0].token_ids[0]]')" = "$ids" ]
	grep -q '^data: \[DONE\]$' "$P/s"
	run -0 http POST /v1/completions '{"prompt": "hi", "max_tokens": 2}'
	[[ $output == "400 "*"model 'r' has no tokenizer: give the prompt as token ids"* ]]
}

@test "validation: a field of the wrong type or out of range is a 400 naming it; unknown fields are ignored" {
	start_serve MEMRA_MODELS="s=$(smollm2)"
	m='"messages": [{"role": "user", "content": "hi"}]'
	run -0 http POST /v1/chat/completions "{$m, \"temperature\": \"hot\"}"
	[[ $output == "400 {\"error\": {\"message\": \"'temperature': not a number\""* ]]
	for f in '"max_tokens": 0' '"max_completion_tokens": "9"' '"n": 0' '"n": 1.5' '"seed": "x"' \
	    '"top_p": 2' '"presence_penalty": 9' '"frequency_penalty": null, "stop": ""' '"stream": 1' \
	    '"logprobs": "yes"' '"top_logprobs": 2' '"stream_options": {}' '"tool_choice": "required"' \
	    '"tools": {}' '"parallel_tool_calls": "no"' '"logit_bias": {"1": 5}'; do
		k=${f##*, }; k=${k#\"}; k=${k%%\"*}
		run -0 http POST /v1/chat/completions "{$m, $f}"
		[[ $output == "400 {\"error\": {\"message\": \"'$k'"* ]] || { echo "$f: $output"; false; }
	done
	run -0 http POST /v1/completions '{"prompt": "hi", "logprobs": true}'
	[[ $output == "400 {\"error\": {\"message\": \"'logprobs': not an integer\""* ]]
	run -0 http POST /v1/completions '{"prompt": "hi", "echo": true}'
	[[ $output == "400 {\"error\": {\"message\": \"'echo': not supported\""* ]]
	run -0 http POST /v1/chat/completions "{$m, \"max_tokens\": 2, \"frobnicate\": {\"x\": [1]}, \"user\": \"u\", \"metadata\": {}}"
	[[ $output == "200 "* ]]
}

@test "finish_reason is length at max_tokens and at the context's end; max_tokens past it is clamped" {
	need_py openai
	start_serve MEMRA_MODELS="s=$(smollm2)" MEMRA_CTX=64
	for q in '{"prompt": "Once upon a time", "ignore_eos": true}' \
	    '{"prompt": "Once upon a time", "ignore_eos": true, "max_tokens": 100000}' \
	    '{"messages": [{"role": "user", "content": "Tell me a story."}], "ignore_eos": true}'; do
		ep=/v1/completions; [[ $q == *messages* ]] && ep=/v1/chat/completions
		run -0 http POST $ep "$q"
		p=$(jq .usage.prompt_tokens "$P/body")
		[ "$(jq .usage.completion_tokens "$P/body")" = $((64 - p)) ]
		[ "$(jq -r '.choices[0].finish_reason' "$P/body")" = length ]
		curl -sN "$URL$ep" -d "${q%\}}, \"stream\": true}" >"$P/s"
		[ "$(grep -o '"finish_reason": "[a-z]*"' "$P/s")" = '"finish_reason": "length"' ]
	done
	run -0 http POST /v1/completions '{"prompt": "Once upon a time", "ignore_eos": true, "max_tokens": 5}'
	[ "$(jq -r '.choices[0].finish_reason' "$P/body")" = length ]
	[ "$(jq .usage.completion_tokens "$P/body")" = 5 ]
	kill "$SPID"; wait "$SPID" 2>/dev/null || true
	# greedy and speculative: the verify rows stop at the context's end too
	start_serve MEMRA_MODELS="a=$(model_a)" MEMRA_CTX=64 MEMRA_SPEC_K=3
	run -0 http POST /v1/completions '{"prompt": "def fib(n):", "ignore_eos": true, "temperature": 0}'
	p=$(jq .usage.prompt_tokens "$P/body")
	[ "$(jq .usage.completion_tokens "$P/body")" = $((64 - p)) ]
	[ "$(jq -r '.choices[0].finish_reason' "$P/body")" = length ]
}

@test "logprobs: chat and completions, streamed and not, in OpenAI's shapes; the tokens unchanged" {
	need_py openai
	start_serve MEMRA_MODELS="s=$(smollm2)"
	q='{"model": "s", "messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 12, "temperature": 0, "logprobs": true, "top_logprobs": 3}'
	$SC "$URL" create chat "$q" >"$P/c"
	# a token an entry, three alternatives each, the greedy token the likeliest; the tokens are the content
	[ "$(jq '.choices[0].logprobs.content | length' "$P/c")" = "$(jq .usage.completion_tokens "$P/c")" ]
	[ "$(jq -c '[.choices[0].logprobs.content[] | .top_logprobs | length] | unique' "$P/c")" = '[3]' ]
	[ "$(jq '[.choices[0].logprobs.content[] | .token == .top_logprobs[0].token and .logprob == .top_logprobs[0].logprob and .logprob <= 0 and (.bytes | length) > 0] | all' "$P/c")" = true ]
	[ "$(jq '[.choices[0].logprobs.content[] | [.top_logprobs[].logprob | exp] | add <= 1.0001] | all' "$P/c")" = true ]
	[ "$(jq -r '[.choices[0].logprobs.content[].token] | join("")' "$P/c")" = "$(jq -r .choices[0].message.content "$P/c")" ]
	[ "$($SC "$URL" create chat "$(jq -c 'del(.logprobs, .top_logprobs)' <<<"$q")" | jq -r .choices[0].message.content)" = "$(jq -r .choices[0].message.content "$P/c")" ]
	# streamed: the same entries, over the chunks
	run -0 $SC "$URL" stream chat "$q"
	[ "$(jq -c -s '[.[].choices[] | .logprobs.content // [] | .[]]' <<<"$output")" = "$(jq -c '.choices[0].logprobs.content' "$P/c")" ]
	# not asked for: null
	[ "$($SC "$URL" create chat "$(jq -c '.logprobs = false | del(.top_logprobs)' <<<"$q")" | jq -c .choices[0].logprobs)" = null ]
	# completions: logprobs N, the tokens the text, their offsets into it
	k='{"model": "s", "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "logprobs": 2, "extra_body": {"ignore_eos": true}}'
	$SC "$URL" create completions "$k" >"$P/k"
	[ "$(jq -r '.choices[0].logprobs.tokens | join("")' "$P/k")" = "$(jq -r .choices[0].text "$P/k")" ]
	[ "$(jq '.choices[0].logprobs.token_logprobs | length' "$P/k")" = 8 ]
	[ "$(jq -c '[.choices[0].logprobs.top_logprobs[] | length] | unique' "$P/k")" = '[2]' ]
	[ "$(jq -c '.choices[0].logprobs | [.text_offset, ([0] + ([.tokens[] | length] | [foreach .[] as $n (0; . + $n)]) | .[:-1])] | .[0] == .[1]' "$P/k")" = true ]
	run -0 $SC "$URL" stream completions "$k"
	[ "$(jq -c -s '[.[].choices[] | .logprobs.token_logprobs // [] | .[]]' <<<"$output")" = "$(jq -c .choices[0].logprobs.token_logprobs "$P/k")" ]
	[ "$(jq -c -s '[.[].choices[] | .logprobs.text_offset // [] | .[]]' <<<"$output")" = "$(jq -c .choices[0].logprobs.text_offset "$P/k")" ]
	# sampled: the draw unchanged by asking for logprobs
	k='{"model": "s", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.9, "seed": 5}'
	[ "$($SC "$URL" create completions "$k" | jq -r .choices[0].text)" = "$($SC "$URL" create completions "$(jq -c '.logprobs = 5' <<<"$k")" | jq -r .choices[0].text)" ]
}

@test "logprobs of greedy requests on a speculative lane: the tokens of speculative decoding" {
	need_py openai
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=3
	for i in 1 2; do
		p=$(sed -n "${i}p" "$A/prompts.jsonl" | jq -r .prompt)
		k=$(jq -cn --arg p "$p" '{"model": "a", "prompt": $p, "max_tokens": 24, "temperature": 0}')
		$SC "$URL" create completions "$k" | jq -r .choices[0].text >>"$P/spec"
		$SC "$URL" create completions "$(jq -c '.logprobs = 1' <<<"$k")" >"$P/lp"
		jq -r .choices[0].text "$P/lp" >>"$P/lpt"
		[ "$(jq '.choices[0].logprobs | [.token_logprobs, [.top_logprobs[] | to_entries[0].value]] | .[0] == .[1]' "$P/lp")" = true ]
	done
	cmp "$P/spec" "$P/lpt"
}

@test "n choices: choice i is the request alone with seed + i; usage counts them all; chunks carry their index" {
	need_py openai
	start_serve MEMRA_MODELS="s=$(smollm2)"
	q='{"model": "s", "prompt": "Once upon a time", "max_tokens": 10, "temperature": 0.9, "seed": 11, "n": 3}'
	$SC "$URL" create completions "$q" >"$P/n"
	[ "$(jq -c '[.choices[].index]' "$P/n")" = '[0,1,2]' ]
	tot=0
	for i in 0 1 2; do
		$SC "$URL" create completions "$(jq -c ".n = 1 | .seed = $((11 + i))" <<<"$q")" >"$P/one"
		[ "$(jq -r .choices[0].text "$P/one")" = "$(jq -r ".choices[$i].text" "$P/n")" ]
		[ "$(jq -r .choices[0].finish_reason "$P/one")" = "$(jq -r ".choices[$i].finish_reason" "$P/n")" ]
		tot=$((tot + $(jq .usage.completion_tokens "$P/one")))
	done
	[ "$(jq .usage.completion_tokens "$P/n")" = "$tot" ]
	[ "$(jq '[.choices[].text] | unique | length' "$P/n")" -gt 1 ]
	run -0 $SC "$URL" stream completions "$(jq -c '.stream_options = {"include_usage": true}' <<<"$q")"
	for i in 0 1 2; do
		[ "$(jq -r -s "[.[].choices[] | select(.index == $i) | .text] | join(\"\")" <<<"$output")" = "$(jq -r ".choices[$i].text" "$P/n")" ]
		[ "$(jq -r -s "[.[].choices[] | select(.index == $i) | .finish_reason // empty] | join(\",\")" <<<"$output")" = "$(jq -r ".choices[$i].finish_reason" "$P/n")" ]
	done
	[ "$(jq -s '[.[] | select(.usage != null)] | length' <<<"$output")" = 1 ]
	[ "$(jq -s '.[-1].usage.completion_tokens' <<<"$output")" = "$tot" ]
	# without include_usage, no usage chunk
	run -0 $SC "$URL" stream completions "$q"
	[ "$(jq -s '[.[] | select(.usage != null)] | length' <<<"$output")" = 0 ]
	# chat, greedy: every choice the greedy reply, with its own logprobs
	c='{"model": "s", "messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 8, "temperature": 0}'
	one=$($SC "$URL" create chat "$c" | jq -r .choices[0].message.content)
	$SC "$URL" create chat "$(jq -c '.n = 2 | .logprobs = true' <<<"$c")" >"$P/c2"
	[ "$(jq -r .choices[1].message.content "$P/c2")" = "$one" ]
	[ "$(jq -r .choices[0].message.content "$P/c2")" = "$one" ]
	[ "$(jq '.choices[1].logprobs.content | length' "$P/c2")" -ge 1 ]
	[ "$(jq -c '.choices[0].logprobs' "$P/c2")" = "$(jq -c '.choices[1].logprobs' "$P/c2")" ]
}

@test "tools: a named tool_choice is a call of that tool, streamed as OpenAI streams calls; required and none" {
	need_py openai
	model_a_tools
	start_serve MEMRA_MODELS="a=$P/a"
	t='"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}, {"type": "function", "function": {"name": "f2", "parameters": {"type": "object"}}}]'
	m='"messages": [{"role": "user", "content": "def f(x):"}], "max_tokens": 48, "temperature": 0'
	q="{\"model\": \"a\", $m, $t, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}}"
	$SC "$URL" create chat "$q" >"$P/w"
	[ "$(jq -r .choices[0].finish_reason "$P/w")" = tool_calls ]
	[ "$(jq -r .choices[0].message.content "$P/w")" = null ]
	[ "$(jq -c '[.choices[0].message.tool_calls[] | .function.name]' "$P/w")" = '["get_weather"]' ]
	[ "$(jq -r .choices[0].message.tool_calls[0].id "$P/w")" = call_1_0 ]
	jq -r .choices[0].message.tool_calls[0].function.arguments "$P/w" | jq -e 'type == "object"'
	# streamed: the call's id, type and name first, its arguments after, index 0
	run -0 $SC "$URL" stream chat "$q"
	d=$(jq -c -s '[.[].choices[0].delta.tool_calls // empty | .[]]' <<<"$output")
	[ "$(jq -c '.[0] | [.index, .id, .type, .function.name, .function.arguments]' <<<"$d")" = '[0,"call_2_0","function","get_weather",""]' ]
	[ "$(jq -c '.[1:] | [.[] | .index, .id, .function.name] | unique' <<<"$d")" = '[null,0]' ]
	[ "$(jq -r '[.[].function.arguments] | join("")' <<<"$d")" = "$(jq -r .choices[0].message.tool_calls[0].function.arguments "$P/w")" ]
	[ "$(jq -r -s '[.[].choices[0].finish_reason // empty] | join(",")' <<<"$output")" = tool_calls ]
	[ "$(jq -r -s '[.[].choices[0].delta.content // empty] | join("")' <<<"$output")" = "" ]
	# required: the reply is made to begin with a call (more prompt tokens than auto's); none: no tools shown
	auto=$($SC "$URL" create chat "{\"model\": \"a\", $m, $t}" | jq .usage.prompt_tokens)
	$SC "$URL" create chat "{\"model\": \"a\", $m, $t, \"tool_choice\": \"required\"}" >"$P/r"
	[ "$(jq .usage.prompt_tokens "$P/r")" -gt "$auto" ]
	[ "$(jq -r '.choices[0].message.tool_calls != null or (.choices[0].message.content | startswith("<tool_call>"))' "$P/r")" = true ]
	[ "$($SC "$URL" create chat "{\"model\": \"a\", $m, $t, \"tool_choice\": \"none\"}" | jq .usage.prompt_tokens)" -lt "$auto" ]
	run -0 $SC "$URL" create chat "{\"model\": \"a\", $m, $t, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"nope\"}}}"
	[[ $output == "error 400 'tool_choice': not auto, none, required or "* ]]
}
