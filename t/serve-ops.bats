bats_require_minimum_version 1.5.0
# serve as an operator runs it: keys, rate limits, /metrics, drain, the access log,
# and a bounded load and fault test (tools/serve-load.py).

setup() {
	load helper
	load serve
	P=$BATS_TEST_TMPDIR
	SC="python3 $TOP/t/serve-client.py"
	SPID=
	K1=456f1612bd25c6c8455039437bf441f43aa3b7d1c0b0047c712d5036dfebef0d	# sk-one
	K2=5e31278545505db1d65bf1dd696e8eaa1edfb00ba455e21c83200c04ef643c91	# sk-two
}

teardown() {	# serve_teardown's log on failure, and the server killed outright
	[ -n "$SPID" ] && kill -9 "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
	SPID= serve_teardown
}



# wait_log REGEX: until the server's log has a line matching it (10 s at most)
wait_log() {
	for _ in $(seq 100); do grep -q "$1" "$LOG" && return 0; sleep 0.1; done
	grep "$1" "$LOG"
}

# logged N: until N requests have their access-log line (a request's tokens
# are charged and counted just before it)
logged() {
	for _ in $(seq 100); do [ "$(grep -c '^\[serve\] request ' "$LOG")" -ge "$1" ] && return 0; sleep 0.1; done
	return 1
}

Q='{"prompt": "def fib(n):", "max_tokens": 8, "temperature": 0, "ignore_eos": true}'

@test "ops settings: --help lists them; bad values and a malformed keys file refuse to boot" {
	run -0 serve --help
	[[ $output == *"[--api-keys-file file] [--rate-rpm N] [--rate-tpm N] [--drain-s N]"* ]]
	[[ $output == *"--rate-tpm N "*"(MEMRA_RATE_TPM, 0)"* ]]
	run -2 --separate-stderr env MEMRA_MODELS=x=y MEMRA_RATE_RPM=-1 serve
	[ "$stderr" = "serve: MEMRA_RATE_RPM (--rate-rpm): '-1': out of range 0..1073741824 or not a number" ]
	run -2 --separate-stderr env MEMRA_MODELS=x=y serve --drain-s soon
	[ "$stderr" = "serve: MEMRA_DRAIN_S (--drain-s): 'soon': out of range 0..86400 or not a number" ]
	printf '# keys\n%s name=ops\n\nsk-two\n' "$K1" >"$P/keys"
	run -2 --separate-stderr env MEMRA_MODELS=x=y MEMRA_API_KEYS_FILE="$P/keys" serve
	[ "$stderr" = "serve: MEMRA_API_KEYS_FILE: $P/keys:4: not a SHA-256 digest (64 hex digits) of a key" ]
	printf '%s rpm=often\n' "$K1" >"$P/keys"
	run -2 --separate-stderr env MEMRA_MODELS=x=y serve --api-keys-file "$P/keys"
	[ "$stderr" = "serve: MEMRA_API_KEYS_FILE: $P/keys:1: 'rpm=often': not a number in 0..1099511627776" ]
	printf '%s\n%s\n' "$K1" "$K1" >"$P/keys"
	run -2 --separate-stderr env MEMRA_MODELS=x=y serve --api-keys-file "$P/keys"
	[ "$stderr" = "serve: MEMRA_API_KEYS_FILE: $P/keys:2: a digest given twice" ]
	printf '# none yet\n' >"$P/keys"
	run -2 --separate-stderr env MEMRA_MODELS=x=y serve --api-keys-file "$P/keys"
	[ "$stderr" = "serve: MEMRA_API_KEYS_FILE: $P/keys: no key in it" ]
	run -1 --separate-stderr env MEMRA_MODELS=x=y serve --api-keys-file "$P/nofile"
	[[ $stderr == "serve: MEMRA_API_KEYS_FILE: $P/nofile: No such file"* ]]
}

@test "keys: the file's digests and MEMRA_API_KEY are accepted, others get OpenAI's 401; no key in the log or the environment" {
	need_py openai
	A=$(model_a)
	printf '# team keys\n%s name=ops\n%s  # two\n' "$K1" "$(printf %s sk-two | sha256sum | cut -d' ' -f1)" >"$P/keys"
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0 MEMRA_API_KEYS_FILE="$P/keys" MEMRA_API_KEY=sk-env-3
	grep -q "^\[serve\] API keys: 3 (2 from $P/keys, 1 from MEMRA_API_KEY); a key's limits by default: 0 requests, 0 tokens a minute (0: none)$" "$LOG"
	grep -q '(max sessions 4, compat openai, API key required)$' "$LOG"
	for k in sk-one sk-two sk-env-3; do
		run -0 $SC "$URL" --key "$k" models
		[ "$output" = a ]
	done
	run -0 $SC "$URL" --key sk-one complete a "def fib(n):" 4
	[ "$(jq -r .finish <<<"$output")" = length ]
	run -0 $SC "$URL" --key sk-four models
	[ "$output" = "error 401 invalid or missing API key" ]
	run -0 http POST /v1/completions "$Q" -H 'Authorization: Bearer sk-on'
	[ "$output" = '401 {"error": {"message": "invalid or missing API key", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}' ]
	run -0 http POST /v1/completions "$Q"
	[[ $output == '401 '* ]]
	run -0 http GET /health
	[[ $output == '200 '* ]]
	logged 8
	grep -q '^\[serve\] request 4: a POST /v1/completions 200 key=ops prompt=5 completion=4 ' "$LOG"
	grep -q '^\[serve\] request 2: - GET /v1/models 200 key=sha256:5e312785 ' "$LOG"
	grep -q '^\[serve\] request 3: - GET /v1/models 200 key=MEMRA_API_KEY ' "$LOG"
	grep -q '^\[serve\] request 6: - POST /v1/completions 401 key=- ' "$LOG"
	! grep -q 'sk-' "$LOG" || false
	! tr '\0' '\n' <"/proc/$SPID/environ" | grep -q 'sk-env-3' || false
}

@test "rate limits: requests and tokens a minute per key, 429 with Retry-After in OpenAI's shape" {
	need_py openai
	A=$(model_a)
	printf '%s name=one rpm=2\n%s name=two tpm=10\n' "$K1" "$K2" >"$P/keys"
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0 MEMRA_API_KEYS_FILE="$P/keys" MEMRA_RATE_RPM=100
	grep -q "a key's limits by default: 100 requests, 0 tokens a minute" "$LOG"
	for i in 1 2; do
		run -0 http POST /v1/completions "$Q" -H 'Authorization: Bearer sk-one'
		[[ $output == '200 '* ]]
	done
	run -0 curl -s -i "$URL/v1/completions" -d "$Q" -H 'Authorization: Bearer sk-one'
	[[ ${lines[0]} == "HTTP/1.1 429 "* ]]
	retry=$(sed -n 's/^Retry-After: \([0-9]*\)\r$/\1/p' <<<"$output")
	[ "$retry" -ge 29 ]	# 2 a minute: one each 30 s
	[ "$retry" -le 30 ]
	[[ ${lines[-1]} == '{"error": {"message": "rate limit reached for requests per minute (limit 2): try again in '*' s", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}' ]]
	run -0 http GET /v1/models '' -H 'Authorization: Bearer sk-one'	# not limited
	[[ $output == '200 '* ]]
	# tokens: 5 prompt + 8 completion = 13 charged of 10: 3 in debt, 4 tokens to go at 10 a minute
	run -0 http POST /v1/completions "$Q" -H 'Authorization: Bearer sk-two'
	[[ $output == '200 '* ]]
	logged 5
	run -0 curl -s -i "$URL/v1/completions" -d "$Q" -H 'Authorization: Bearer sk-two'
	[[ ${lines[0]} == "HTTP/1.1 429 "* ]]
	retry=$(sed -n 's/^Retry-After: \([0-9]*\)\r$/\1/p' <<<"$output")
	[ "$retry" -ge 23 ]
	[ "$retry" -le 24 ]
	[[ $output == *'"type": "tokens", "param": null, "code": "rate_limit_exceeded"'* ]]
	run -0 $SC "$URL" --key sk-two complete a "def fib(n):" 4
	[[ $output == "error 429 rate limit reached for tokens per minute (limit 10): try again in "* ]]
	curl -s "$URL/metrics" >"$P/m"
	grep -qx 'memra_rate_limited_total{limit="requests"} 1' "$P/m"
	grep -qx 'memra_rate_limited_total{limit="tokens"} 2' "$P/m"
	grep -qx 'memra_requests_total{endpoint="/v1/completions",status="429"} 3' "$P/m"
}

@test "/metrics parses with the Prometheus client and counts what was served" {
	need_py openai prometheus_client
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=3
	run -0 http POST /v1/completions '{"prompt": "def fib(n):", "max_tokens": 12, "ignore_eos": true}'
	curl -sN "$URL/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "def fib(n):"}], "max_tokens": 6, "ignore_eos": true, "temperature": 0, "stream": true}' >"$P/s"
	grep -q '^data: \[DONE\]$' "$P/s"
	run -0 http GET /nope
	run -0 http POST /v1/completions '{bad'
	logged 4
	curl -s -D "$P/h" "$URL/metrics" >"$P/m"
	grep -q '^Content-Type: text/plain; version=0.0.4; charset=utf-8' "$P/h"
	python3 - "$P/m" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
def one(name, **labels):
    s = [x for f in fams.values() for x in f.samples if x.name == name and all(x.labels.get(k) == v for k, v in labels.items())]
    assert len(s) == 1, (name, labels, s)
    return s[0].value
want = {"memra_requests": "counter", "memra_prompt_tokens": "counter", "memra_completion_tokens": "counter",
        "memra_cached_tokens": "counter", "memra_time_to_first_token_seconds": "histogram",
        "memra_inter_token_latency_seconds": "histogram", "memra_queue_depth": "gauge",
        "memra_running_sessions": "gauge", "memra_spec_rounds": "counter", "memra_spec_drafted_tokens": "counter",
        "memra_spec_accepted_tokens": "counter", "memra_device_memory_used_bytes": "gauge",
        "process_resident_memory_bytes": "gauge", "process_open_fds": "gauge", "process_cpu_seconds": "counter"}
for n, t in want.items():
    assert fams[n].type == t, (n, fams[n].type)
assert one("memra_requests_total", endpoint="/v1/completions", status="200") == 1
assert one("memra_requests_total", endpoint="/v1/chat/completions", status="200") == 1
assert one("memra_requests_total", endpoint="other", status="404") == 1
assert one("memra_requests_total", endpoint="/v1/completions", status="400") == 1
assert one("memra_completion_tokens_total", model="a") == 18
assert one("memra_prompt_tokens_total", model="a") > 5
assert one("memra_cached_tokens_total", model="a") == 0
assert one("memra_time_to_first_token_seconds_count", model="a") == 2
assert one("memra_time_to_first_token_seconds_bucket", model="a", le="+Inf") == 2
assert one("memra_inter_token_latency_seconds_count", model="a") == 2
assert one("memra_queue_depth") == 0 and one("memra_running_sessions") == 0
rounds = sum(s.value for s in fams["memra_spec_rounds"].samples)
drafted = sum(s.value for s in fams["memra_spec_drafted_tokens"].samples)
acc = sum(s.value for s in fams["memra_spec_accepted_tokens"].samples)
assert rounds > 0 and 0 <= acc <= drafted <= 3 * rounds, (rounds, drafted, acc)
assert all(s.labels["k"] in ("1", "2", "3") for s in fams["memra_spec_rounds"].samples)
assert one("process_open_fds") > 2 and one("process_resident_memory_bytes") > 1e6
assert one("memra_device_memory_total_bytes") >= one("memra_device_memory_used_bytes") > 0
PY
	if command -v promtool >/dev/null; then promtool check metrics <"$P/m"; fi
}

@test "drain: SIGTERM lets a running stream finish, new requests get 503, then exit 0" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0
	curl -sN "$URL/v1/completions" -d '{"prompt": "def f(x):", "max_tokens": 600, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}}' >"$P/s" &
	c=$!
	for _ in $(seq 100); do grep -q 'data:' "$P/s" && break; sleep 0.1; done
	kill -TERM "$SPID"
	wait_log 'draining: 1 requests in flight, up to 30 s (MEMRA_DRAIN_S)'
	run -0 curl -s -i "$URL/v1/completions" -d "$Q"
	[[ ${lines[0]} == "HTTP/1.1 503 "* ]]
	[[ $output == *$'\r\nConnection: close\r\n'* && $output == *$'\r\nRetry-After: 1\r\n'* ]]
	[[ ${lines[-1]} == '{"error": {"message": "server shutting down", "type": "server_error", "code": 503}}' ]]
	rc=0; wait "$SPID" || rc=$?
	SPID=
	[ "$rc" = 0 ]
	wait "$c"
	grep -q '^data: \[DONE\]$' "$P/s"
	grep -q '"completion_tokens": 600' "$P/s"
	grep -q '^\[serve\] request 1: a POST /v1/completions 200 key=- prompt=[0-9]* completion=600 ' "$LOG"
	grep -q '^\[serve\] request 2: - POST /v1/completions 503 ' "$LOG"
	[ "$(tail -1 "$LOG")" = "[serve] drained: exiting" ]
}

@test "drain: past MEMRA_DRAIN_S the server exits 1; a second signal exits at once" {
	A=$(model_a)
	long='{"prompt": "def f(x):", "max_tokens": 3000, "ignore_eos": true, "stream": true}'
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0 MEMRA_DRAIN_S=1
	curl -sN "$URL/v1/completions" -d "$long" >"$P/s" & c=$!
	for _ in $(seq 100); do grep -q 'data:' "$P/s" && break; sleep 0.1; done
	kill -INT "$SPID"
	rc=0; wait "$SPID" || rc=$?
	SPID=
	[ "$rc" = 1 ]
	grep -q '^\[serve\] SIGINT: draining: 1 requests in flight, up to 1 s' "$LOG"
	grep -q '^serve: drain: 1 requests still in flight after 1 s: exiting$' "$LOG"
	wait "$c" || true
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0
	curl -sN "$URL/v1/completions" -d "$long" >"$P/s" & c=$!
	for _ in $(seq 100); do grep -q 'data:' "$P/s" && break; sleep 0.1; done
	kill -TERM "$SPID"
	wait_log 'draining'
	t0=$(date +%s)
	kill -TERM "$SPID"
	rc=0; wait "$SPID" || rc=$?
	SPID=
	[ "$rc" = 1 ]
	[ $(($(date +%s) - t0)) -le 2 ]
	grep -q '^serve: SIGTERM again: exiting at once$' "$LOG"
	wait "$c" || true
}

@test "access log: one line per request, malformed ones too, never the prompt" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0
	run -0 http POST /v1/completions '{"prompt": "zebra-secret-words", "max_tokens": 3, "temperature": 0}'
	run -0 http GET /v1/models
	run -0 curl -s "$URL/v1/completions" -H 'Transfer-Encoding: chunked' -d '{}'
	logged 3
	run -0 grep '^\[serve\] request ' "$LOG"
	[ "${#lines[@]}" = 3 ]
	[[ ${lines[0]} =~ ^\[serve\]\ request\ 1:\ a\ POST\ /v1/completions\ 200\ key=-\ prompt=[0-9]+\ completion=3\ queued\ [0-9.]+\ s,\ first\ token\ [0-9.]+\ s,\ [0-9.]+\ s$ ]]
	[[ ${lines[1]} =~ ^\[serve\]\ request\ 2:\ -\ GET\ /v1/models\ 200\ key=-\ prompt=0\ completion=0\ queued\ -1.00\ s,\ first\ token\ -1.00\ s,\ [0-9.]+\ s$ ]]
	[[ ${lines[2]} == '[serve] request 3: - - - 411 key=- prompt=0 completion=0 '* ]]
	! grep -q zebra "$LOG" || false
}

# tools/serve-load.py: N requests at C against model A (mixed, 10% cancelled, 5% malformed)
# (RSS slack MB, default 64); the server drains and exits 0 after it
load_a() {
	local n=$1 c=$2 slack=${3:-64} rc=0
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_MAX_SESSIONS=16 MEMRA_QUEUE=64
	run -0 python3 "$TOP/tools/serve-load.py" "$URL" "$SPID" "$A/prompts.jsonl" -n "$n" -c "$c" \
	    --rss-slack-mb "$slack"
	echo "$output"
	[ "${lines[-1]}" = ok ]
	kill -TERM "$SPID"
	wait "$SPID" || rc=$?
	SPID=
	! grep -q 'ERROR\|runtime error' "$LOG" || false
	[ "$rc" = 0 ]
}

# 2000 at c=64 as issue 24 asks: 160 s on a shared 2-core box; MEMRA_LOAD_N sets fewer
@test "load: 2000 mixed requests at c=64 (cancels, faults): designed statuses, solo replies, fds and RSS back" {
	load_a "${MEMRA_LOAD_N:-2000}" 64
}

@test "load under ASan+UBSan (make SAN=1): 120 mixed requests at c=32" {
	[ -x "$TOP/build-san/bin/serve" ] || { [ "${MEMRA_REQUIRE_PEERS:-0}" = 1 ] && false; skip "no build-san/bin/serve (make SAN=1)"; }
	SERVE=$TOP/build-san/bin/serve
	# a small quarantine: freed memory comes back as it would without ASan
	export ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=16 UBSAN_OPTIONS=print_stacktrace=1
	load_a 120 32 128
}

# slow PORT MODE: a raw-socket client (Python): "half" sends half a header and
# stalls, "trickle" sends a header a byte every 0.2 s, "idle" connects and
# sends nothing; prints the status it got (0: none) and the seconds it took
slow() {
	python3 - "$URL" "$1" <<'PY'
import select, socket, sys, time
host, port = sys.argv[1].split("//")[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=20)
t0 = time.time()
req = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 40 + b"\r\n\r\n"
got = b""
try:
    if sys.argv[2] == "half":
        s.sendall(req[:20])
    elif sys.argv[2] == "trickle":	# until the server answers
        for b in req:
            s.sendall(bytes([b]))
            if select.select([s], [], [], 0.2)[0]:
                break
    while b"\r\n\r\n" not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
except OSError:
    pass
print(int(got.split(b" ")[1]) if got.startswith(b"HTTP/1.1 ") else 0, round(time.time() - t0, 1),
      "close" if b"Connection: close" in got else "-")
PY
}

@test "deadlines: half a header then a stall gets 408 within MEMRA_HEADER_TIMEOUT_S, others are served meanwhile" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0 MEMRA_HEADER_TIMEOUT_S=1
	run -0 serve --help
	[[ $output == *"--header-timeout-s N a request's header, whole, then 408 (MEMRA_HEADER_TIMEOUT_S,"* ]]
	slow half >"$P/half" &
	local h=$!
	sleep 0.3
	run -0 http GET /v1/models
	[[ $output == "200 "* ]]
	wait "$h"
	read -r st secs conn <"$P/half"
	[ "$st" = 408 ]
	[ "$conn" = close ]
	python3 -c "import sys; sys.exit(not 0.8 <= float('$secs') <= 2.5)"
	logged 2
	grep -q '^\[serve\] request [0-9]*: - - - 408 ' "$LOG"
	run -0 curl -s "$URL/metrics"
	[[ $output == *"memra_requests_timed_out_total 1"* ]]
}

@test "deadlines: a header trickled a byte every 0.2 s gets 408: the deadline is whole, not per byte" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0 MEMRA_HEADER_TIMEOUT_S=1 MEMRA_BODY_TIMEOUT_S=1
	run -0 slow trickle
	read -r st secs conn <<<"$output"
	[ "$st" = 408 ]
	[ "$conn" = close ]
	python3 -c "import sys; sys.exit(not 0.8 <= float('$secs') <= 2.5)"
	# a body slower than MEMRA_BODY_TIMEOUT_S is a 408 too
	run -0 python3 - "$URL" <<'PY'
import socket, sys, time
host, port = sys.argv[1].split("//")[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=20)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{\"prompt\"")
print(s.recv(4096).split(b"\r\n")[0].decode())
PY
	[ "$output" = "HTTP/1.1 408 Request Timeout" ]
}

@test "connections: past MEMRA_MAX_CONNECTIONS a new one gets 503 with Retry-After at once; served again once they close" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0 MEMRA_MAX_CONNECTIONS=3 MEMRA_HEADER_TIMEOUT_S=30
	run -0 python3 - "$URL" <<'PY'
import socket, sys, time
host, port = sys.argv[1].split("//")[1].rsplit(":", 1)
addr = (host, int(port))
idle = [socket.create_connection(addr, timeout=10) for _ in range(3)]
time.sleep(0.3)
s = socket.create_connection(addr, timeout=10)
t0 = time.time()
got = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    got += b
head = got.split(b"\r\n\r\n")[0].decode()
print(head.split("\r\n")[0], "retry" if "Retry-After: 1" in head else "-",
      "close" if "Connection: close" in head else "-", time.time() - t0 < 1)
for c in idle:
    c.close()
PY
	[ "$output" = "HTTP/1.1 503 Service Unavailable retry close True" ]
	for _ in $(seq 50); do
		run -0 http GET /v1/models
		[[ $output == "200 "* ]] && break
		sleep 0.1
	done
	[[ $output == "200 "* ]]
	run -0 curl -s "$URL/metrics"
	[[ $output == *"memra_connections_refused_total 1"* ]]
	grep -q '^\[serve\] request [0-9]*: - - - 503 ' "$LOG"
	run -2 --separate-stderr env MEMRA_MODELS=x=y serve --max-connections 0
	[ "$stderr" = "serve: MEMRA_MAX_CONNECTIONS (--max-connections): '0': out of range 1..1048576 or not a number" ]
}

@test "connections: one that gets no thread (the process's limit) gets 503 with Retry-After, logged and counted, never dropped without a word" {
	A=$(model_a)
	# pthread_create fails with EAGAIN while the file $P/no-threads exists
	cat >"$P/shim.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
int
pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg)
{
	int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
	    (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(RTLD_NEXT,
	    "pthread_create");
	const char *p = getenv("NO_THREADS_WHILE");

	return p != NULL && access(p, F_OK) == 0 ? EAGAIN : real(t, a, f, arg);
}
C
	cc -shared -fPIC -o "$P/shim.so" "$P/shim.c" -ldl
	start_serve LD_PRELOAD="$P/shim.so" NO_THREADS_WHILE="$P/no-threads" MEMRA_MODELS="a=$A" \
	    MEMRA_SPEC_K=0
	touch "$P/no-threads"
	run -0 curl -s -D "$P/head" -o "$P/body" -w '%{http_code}' "$URL/v1/models"
	[ "$output" = 503 ]
	grep -q '^Retry-After: 1' "$P/head"
	[ "$(jq -r .error.message "$P/body")" = "no thread for this connection: retry later" ]
	grep -qx 'serve: connection: no thread for it: Resource temporarily unavailable' "$LOG"
	rm "$P/no-threads"
	run -0 http GET /v1/models
	[[ $output == "200 "* ]]
	run -0 curl -s "$URL/metrics"
	[[ $output == *"memra_connections_refused_total 1"* ]]
	[[ $output == *"memra_connections_open 1"* ]]	# this one: the refused one was closed
	grep -q '^\[serve\] request [0-9]*: - - - 503 ' "$LOG"
}

@test "deadlines: a client that stops reading its stream is given up after MEMRA_WRITE_TIMEOUT_S: the session freed, logged, counted" {
	A=$(model_a)
	start_serve MEMRA_MODELS="a=$A" MEMRA_SPEC_K=0 MEMRA_MAX_SESSIONS=1 MEMRA_WRITE_TIMEOUT_S=1
	# a stream of 3000 tokens (20 s here) to a socket that never reads; with
	# one session, another request is served only once that one's is freed
	run -0 python3 - "$URL" <<'PY'
import json, socket, sys, time, urllib.request
url = sys.argv[1]
host, port = url.split("//")[1].rsplit(":", 1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)	# the server's buffer grows by segments
s.connect((host, int(port)))
body = json.dumps({"model": "a", "prompt": "Once upon a time", "max_tokens": 3000,
                   "ignore_eos": True, "stream": True, "logprobs": 20}).encode()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body)
time.sleep(1)	# it holds the session
t0 = time.time()
q = urllib.request.Request(url + "/v1/completions", headers={"Content-Type": "application/json"},
                           data=json.dumps({"model": "a", "prompt": "Hi", "max_tokens": 4}).encode())
r = urllib.request.urlopen(q, timeout=300)
print(r.status, round(time.time() - t0, 1))
s.close()
PY
	read -r st secs <<<"$output"
	[ "$st" = 200 ]
	grep "write timeout" "$LOG"
	n=$(sed -n 's/.*POST \/v1\/completions 200 .*completion=\([0-9]*\) .*(write timeout.*/\1/p' "$LOG")
	echo "given up after $n tokens, the other request served in $secs s" >&3
	[ "$n" -lt 3000 ]
	curl -s "$URL/metrics" | grep -qx 'memra_write_timeouts_total 1'
	curl -s "$URL/metrics" | grep -qx 'memra_running_sessions 0'
}
