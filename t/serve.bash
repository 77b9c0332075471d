# Shared by the serve*.bats files (load serve): a server on a free loopback port.
# Each file's setup sets P=$BATS_TEST_TMPDIR and SPID=; its teardown calls stop_serve.

# start_serve [memra-server] [VAR=VALUE...]: serve (or $SERVE, or the memra-server
# name) on a free loopback port on the CPU; sets URL, SPID, LOG
start_serve() {
	local cmd=${SERVE:-serve}
	LOG=$P/serve.log
	[ "${1:-}" = memra-server ] && { ln -sf "$TOP/bin/serve" "$P/memra-server"; cmd=$P/memra-server; shift; }
	env MEMRA_HOST=127.0.0.1 MEMRA_PORT=0 "$@" "$cmd" --device cpu -t 2 2>"$LOG" &
	SPID=$!
	for _ in $(seq 600); do
		grep -q 'listening on' "$LOG" && break
		kill -0 "$SPID" 2>/dev/null || { cat "$LOG" >&2; return 1; }
		sleep 0.1
	done
	URL=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$LOG")
	[ -n "$URL" ]
}

# stop_serve: the server started last stops (if it runs)
stop_serve() {
	[ -n "${SPID:-}" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
	SPID=
	return 0
}

# http METHOD PATH [BODY] [curl args]: "STATUS BODY"
http() {
	local m=$1 p=$2 b=${3:-}
	shift 3 || shift $#
	curl -s -o "$P/body" -w '%{http_code}' -X "$m" ${b:+--data-binary "$b"} "$@" "$URL$p"
	printf ' %s' "$(cat "$P/body")"
}

# model_a_tools: a copy of model A in $P/a whose template shows the tools and
# the XML call form (<function=NAME>, as Qwen3.5's); sets A
model_a_tools() {
	A=$(model_a)
	mkdir "$P/a"
	ln -s "$A"/* "$P/a/"
	rm "$P/a/tokenizer_config.json"
	python3 - "$A/tokenizer_config.json" "$P/a/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if tools %}<tools>{{ tools | tojson }}</tools>\nCall one as <tool_call>\n<function=NAME>\n"
    "<parameter=P>\nV\n</parameter>\n</function>\n</tool_call>\n{% endif %}<|im_start|>assistant\n")
json.dump(c, open(sys.argv[2], "w"))
PY
}
