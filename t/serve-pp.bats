bats_require_minimum_version 1.5.0

# serve with its models split into pipeline stages (MEMRA_PP_STAGES) on the
# CPU, the pipe link as the stand-in: the cookbook's proof lines, every reply
# the unsplit server's (greedy and seeded sampling, alone and together, with
# logprobs and a grammar, from the prefix cache and the reuse pool), the
# settings and their errors.

setup() {
	load helper
	load serve
	P=$BATS_TEST_TMPDIR
	SC="python3 $TOP/t/serve-client.py"
	SPID=
}

teardown() { serve_teardown; }

# with FLAGS...: $P/with, a serve that takes FLAGS after start_serve's (SERVE=$P/with start_serve)
with() {
	printf '#!/bin/sh\nexec serve "$@"%s\n' "$(printf ' %q' "$@")" >"$P/with"
	chmod +x "$P/with"
}

# reqs N DT: N completions on model A, arriving DT s apart, each 24..40 new
# tokens whatever it says (ignore_eos): greedy, every fourth seeded-sampled,
# every third streamed
reqs() {
	python3 - "$(model_a)/prompts.jsonl" "$1" "$2" <<'PY'
import json, sys
ps = [json.loads(l)["prompt"] for l in open(sys.argv[1])]
n, dt = int(sys.argv[2]), float(sys.argv[3])
for i in range(n):
    q = {"model": "a", "prompt": ps[i % len(ps)][: 60 + 53 * i], "max_tokens": 24 + (5 * i) % 17,
         "temperature": 0, "delay": round(dt * i, 2), "extra_body": {"ignore_eos": True}}
    if i % 4 == 3:
        q.update(temperature=0.8, top_p=0.95, seed=300 + i)
    if i % 3 == 1:
        q["stream"] = True
    print(json.dumps(q))
PY
}

@test "the cookbook's PP-2 block on CPU stages: its proof lines, each stage's memory, the K policy's own conclusion" {
	need_py openai
	A=$(model_a)
	start_serve memra-server MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=cpu,cpu MEMRA_COMPAT=openai MEMRA_MODELS="step=$A"
	grep -qx '\[pp\] cross-device transport: stage0=cpu stage1=cpu' "$LOG"
	grep -qx '\[pp\] link: pipe (stand-in: the rows through the host and a pipe)' "$LOG"
	grep -Eq '^\[pp\] stage0: cpu \(cpu[^)]*\) layers 0-[0-9] \+ embedding, weights [0-9.]+ MiB' "$LOG"
	grep -Eq '^\[pp\] stage1: cpu \(cpu[^)]*\) layers [1-7]-7 \+ head \+ mtp, weights [0-9.]+ MiB' "$LOG"
	# the proof comes with its model, before the scheduler's lines
	[ "$(grep -n '^\[pp\] cross-device' "$LOG" | cut -d: -f1)" -gt "$(grep -n '^\[model\] step: ' "$LOG" | head -1 | cut -d: -f1)" ]
	grep -Eq '^\[sched\] step: stages 0-1 on cpu: [0-9.]+ MiB a session \([0-9]+ MiB free before; room for [0-9]+\)$' "$LOG"
	# the K policy measured the split forward and decided for itself (not pinned)
	grep -Eq '^\[sched\] step: a step of m rows \(ms\): 1: [0-9.e+-]+ ' "$LOG"
	grep -Eq '^\[sched\] step: speculative K by load, up to 3 \(acceptance 0.5 until measured\): 1\+ sessions K=[0-3]' "$LOG"
	grep -q '(max sessions 4, compat openai)' "$LOG"
	run -0 $SC "$URL" complete step "def fib(n):" 16
	[ "$(jq -r .finish <<<"$output")" = length ]
}

@test "every reply of the split server is the unsplit server's: alone, 20 at once (micro-batches), speculation on and off" {
	need_py openai
	A=$(model_a)
	reqs 20 0.05 >"$P/q.jsonl"
	start_serve MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=1 MEMRA_SPEC_K=0
	run -0 $SC "$URL" solo "$P/q.jsonl"
	echo "$output" >"$P/whole"
	[ "$(grep -c '"text"' "$P/whole")" -eq 20 ]
	stop_serve
	start_serve MEMRA_MODELS="a=$A" MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=cpu,cpu MEMRA_MAX_SESSIONS=1 MEMRA_SPEC_K=0
	run -0 $SC "$URL" solo "$P/q.jsonl"
	diff "$P/whole" - <<<"$output"
	stop_serve
	for k in 0 3; do
		start_serve MEMRA_MODELS="a=$A" MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=cpu,cpu MEMRA_MAX_SESSIONS=20 MEMRA_SPEC_K=$k MEMRA_PREFILL_CHUNK=64
		grep -q "^\[model\] a: ctx=4096 K=$k " "$LOG"
		run -0 $SC "$URL" staggered "$P/q.jsonl"
		diff "$P/whole" - <<<"$output"
		# K=3: the greedy sessions' verify rows are several micro-batches a step
		[ $k = 0 ] || curl -s "$URL/metrics" | grep -Eqx 'memra_pp_overlap_waves_total [1-9][0-9]*'
		stop_serve
	done
	# three stages, the splits given, the flags over the environment
	with --pp-stages 3 --pp-devices cpu,cpu,cpu --pp-splits 2,5
	SERVE=$P/with start_serve MEMRA_MODELS="a=$A" MEMRA_PP_STAGES=2 MEMRA_MAX_SESSIONS=20
	grep -qx '\[pp\] cross-device transport: stage0=cpu stage1=cpu stage2=cpu' "$LOG"
	grep -q '^\[pp\] stage1: cpu (cpu[^)]*) layers 2-4,' "$LOG"
	run -0 $SC "$URL" staggered "$P/q.jsonl"
	diff "$P/whole" - <<<"$output"
}

@test "serve-identity on the split server: every request its solo reply at c=24" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=cpu,cpu MEMRA_MAX_SESSIONS=24 MEMRA_PREFILL_CHUNK=128
	run -0 python3 "$TOP/tools/serve-identity.py" "$URL" -c 24 --vocab 8192 --model a --gap 0.02
	[ "${lines[-1]}" = "IDENTITY PASS c=24" ]
}

@test "the split server's prefix cache and reuse pool hit: cached_tokens, the replies of both off" {
	need_py openai
	A=$(model_a)
	for run in off on; do
		set -- MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0
		[ $run = on ] && set -- MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=cpu,cpu
		start_serve MEMRA_MODELS="a=$A" MEMRA_PREFILL_CHUNK=32 "$@"
		python3 "$TOP/t/serve-conv.py" "$URL" a 8 12 >"$P/$run.jsonl"
		curl -s "$URL/metrics" >"$P/$run.metrics"
		stop_serve
		cp "$LOG" "$P/$run.log"
		jq -r .content "$P/$run.jsonl" >"$P/$run.txt"
	done
	grep -qx '\[pp\] cross-device transport: stage0=cpu stage1=cpu' "$P/on.log"
	grep -Eq '^\[sched\] a: prefix cache: [0-9]+ MiB \(a quarter of the memory the sessions leave' "$P/on.log"
	[ "$(wc -l <"$P/on.txt")" = 8 ]
	cmp "$P/off.txt" "$P/on.txt"
	grep -Eq '^\[worker\] a: reuse: [1-9][0-9]* committed tokens resumed' "$P/on.log"
	[ "$(jq -r .cached_tokens "$P/on.jsonl" | tail -1)" -gt 0 ]
	sum=$(jq -s 'map(.cached_tokens) | add' "$P/on.jsonl")
	[ "$sum" -gt 0 ]
	grep -qx "memra_cached_tokens_total{model=\"a\"} $sum" "$P/on.metrics"
	grep -Eqx 'memra_device_memory_total_bytes [1-9][0-9.e+]*' "$P/on.metrics"
	# the cache alone (no pool): its blocks restore each stage's part
	start_serve MEMRA_MODELS="a=$A" MEMRA_PREFILL_CHUNK=32 MEMRA_REUSE_POOL=0 MEMRA_PREFIX_CACHE_MB=64 MEMRA_PP_STAGES=2
	grep -Eq '^\[sched\] a: prefix cache: 64 MiB, [0-9]+ blocks of 32 tokens' "$LOG"
	python3 "$TOP/t/serve-conv.py" "$URL" a 8 12 >"$P/cache.jsonl"
	jq -r .content "$P/cache.jsonl" | cmp "$P/off.txt" -
	[ "$(jq -r .cached_tokens "$P/cache.jsonl" | tail -1)" -gt 0 ]
	stop_serve
	# blocks of 64 in chunks of 128: each stage's snapshot where a forward ended,
	# resumed inside a chunk too; the unsplit server's replies with both off
	start_serve MEMRA_MODELS="a=$A" MEMRA_PREFILL_CHUNK=128 MEMRA_REUSE_POOL=0 MEMRA_PREFIX_CACHE_MB=0
	python3 "$TOP/t/serve-conv.py" "$URL" a 8 12 | jq -r .content >"$P/off128.txt"
	stop_serve
	start_serve MEMRA_MODELS="a=$A" MEMRA_PREFILL_CHUNK=128 MEMRA_REUSE_POOL=0 MEMRA_PREFIX_CACHE_MB=64 MEMRA_PP_STAGES=2
	grep -Eq '^\[sched\] a: prefix cache: 6[0-4] MiB, [0-9]+ blocks of 64 tokens, [0-9.]+ MiB each \(KV rows\), [0-9]+ snapshots' "$LOG"
	python3 "$TOP/t/serve-conv.py" "$URL" a 8 12 >"$P/cache128.jsonl"
	jq -r .content "$P/cache128.jsonl" | cmp "$P/off128.txt" -
	jq -s -e 'map(.cached_tokens % 128 == 64) | any' "$P/cache128.jsonl"
}

@test "logprobs, a grammar, n choices and a drain on the split server: the unsplit server's bytes" {
	need_py openai
	A=$(model_a)
	lp='{"model": "a", "prompt": "def fibonacci(n):", "max_tokens": 16, "temperature": 0, "logprobs": 3}'
	js='{"model": "a", "messages": [{"role": "user", "content": "Give me a JSON object."}], "max_tokens": 40, "temperature": 0, "response_format": {"type": "json_object"}}'
	nc='{"model": "a", "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0.9, "seed": 7, "n": 3}'
	for run in whole split; do
		set --
		[ $run = split ] && set -- MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=cpu,cpu
		start_serve MEMRA_MODELS="a=$A" "$@"
		for q in "$lp" "$js" "$nc"; do
			$SC "$URL" create "$(jq -r 'if .messages then "chat" else "completions" end' <<<"$q")" "$q" |
			    jq -c '{choices, usage}' >>"$P/$run"
		done
		[ $run = whole ] && stop_serve
	done
	cmp "$P/whole" "$P/split"
	[ "$(wc -l <"$P/split")" = 3 ]
	[ "$(sed -n 1p "$P/split" | jq '.choices[0].logprobs.token_logprobs | length')" = 16 ]
	sed -n 2p "$P/split" | jq -r '.choices[0].message.content' | jq -e 'type == "object"' >/dev/null
	[ "$(sed -n 3p "$P/split" | jq '.choices | length')" = 3 ]
	# a drain on the split server: a running stream finishes, then exit 0
	curl -sN "$URL/v1/completions" -d '{"prompt": "def f(x):", "max_tokens": 200, "ignore_eos": true, "stream": true}' >"$P/s" &
	c=$!
	for _ in $(seq 100); do grep -q 'data:' "$P/s" && break; sleep 0.1; done
	kill -TERM "$SPID"
	rc=0; wait "$SPID" || rc=$?
	SPID=
	[ "$rc" = 0 ]
	wait "$c"
	grep -q '^data: \[DONE\]$' "$P/s"
	[ "$(tail -1 "$LOG")" = "[serve] drained: exiting" ]
}

@test "the pipeline's settings: a device list that does not match the stages, bad values, a split past the layers" {
	A=$(model_a)
	MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=cpu run -2 --separate-stderr env MEMRA_MODELS="a=$A" serve
	[ "$stderr" = "serve: MEMRA_PP_DEVICES: pipeline: devices 'cpu': 1 for 2 stages" ]
	run -2 --separate-stderr env MEMRA_MODELS="a=$A" serve --pp-stages 2 --pp-devices cpu,cpu,cpu
	[ "$stderr" = "serve: MEMRA_PP_DEVICES: pipeline: devices 'cpu,cpu,cpu': more than 2 stages" ]
	run -2 --separate-stderr env MEMRA_MODELS="a=$A" MEMRA_PP_STAGES=17 serve
	[ "$stderr" = "serve: MEMRA_PP_STAGES: '17': not 1..16" ]
	run -2 --separate-stderr env MEMRA_MODELS="a=$A" MEMRA_PP_DEVICES=cpu,cpu serve
	[ "$stderr" = "serve: MEMRA_PP_DEVICES, MEMRA_PP_SPLITS: without MEMRA_PP_STAGES of 2 or more" ]
	run -2 --separate-stderr env MEMRA_MODELS="a=$A" serve --pp-stages 2 --pp-splits 3,4
	[[ $stderr == "serve: MEMRA_PP_SPLITS: pipeline: splits '3,4': "* ]]
	run -2 --separate-stderr env MEMRA_MODELS="a=$A" MEMRA_PP_OTHER=1 serve
	[ "$stderr" = "serve: MEMRA_PP_OTHER: not supported by this server (refusing to run a different configuration)" ]
	run -1 --separate-stderr env MEMRA_MODELS="a=$A" serve --device cpu -t 1 --pp-stages 2 --pp-splits 9
	[ "${stderr_lines[-1]}" = "serve: stage 0 (cpu): $A: pipeline: a stage of layers 0..8: the model has layers 0..7" ]
	# a session budget that does not fit names what does
	run -1 --separate-stderr env MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=4096 MEMRA_CTX=16777216 serve --device cpu -t 1 --pp-stages 2
	[[ ${stderr_lines[-1]} == "serve: a: MEMRA_MAX_SESSIONS x MEMRA_CTX: 4096 sessions of ctx 16777216 need "*" MiB each, "*"at most "* ]]
	# --pp-stages 1 over the environment: no split, no proof lines
	with --pp-stages 1
	SERVE=$P/with start_serve MEMRA_MODELS="a=$A" MEMRA_PP_STAGES=2
	run -1 grep -q '^\[pp\]' "$LOG"
}

@test "serve(1) documents each pipeline variable and flag in --help, OPTIONS and ENVIRONMENT" {
	command -v mandoc >/dev/null || skip "mandoc not installed"
	man=$(mandoc -Tascii "$TOP/man/serve.1" | sed 's/.\x08//g')
	for v in MEMRA_PP_STAGES MEMRA_PP_DEVICES MEMRA_PP_SPLITS; do
		serve --help | grep -q "($v[,)]"
		sed -n '/^ENVIRONMENT/,/^EXIT STATUS/p' <<<"$man" | grep -q "$v"
	done
	for o in pp-stages pp-devices pp-splits; do
		serve --help | grep -q -- "^  --$o "
		sed -n '/^OPTIONS/,/^ENVIRONMENT/p' <<<"$man" | grep -q -- "--$o"
	done
	sed -n '/^DESCRIPTION/,/^OPTIONS/p' <<<"$man" | grep -q '^  *Pipeline stages$'
}

# bats test_tags=gpu
@test "the cookbook's PP-2 block on two GPUs, unchanged: dev0 and dev1, the NCCL link, the unsplit replies" {
	need_py openai
	A=$(model_a)
	[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] || skip "fewer than two GPUs"
	quant-nvfp4 -t 1 --type Q8_0 "$A" "$P/x.gguf" 2>/dev/null
	reqs 12 0.05 >"$P/q.jsonl"
	with --device cuda:0
	SERVE=$P/with start_serve MEMRA_COMPAT=openai MEMRA_MODELS="step=$P/x.gguf" MEMRA_MAX_SESSIONS=1
	sed 's/"model": "a"/"model": "step"/' "$P/q.jsonl" >"$P/qs.jsonl"
	$SC "$URL" solo "$P/qs.jsonl" >"$P/whole"
	stop_serve
	start_serve memra-server MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=0,1 MEMRA_COMPAT=openai MEMRA_MODELS="step=$P/x.gguf"
	grep -qx '\[pp\] cross-device transport: stage0=dev0 stage1=dev1' "$LOG"
	grep -q '^\[pp\] link: nccl' "$LOG"
	run -0 $SC "$URL" staggered "$P/qs.jsonl"
	diff "$P/whole" - <<<"$output"
}
