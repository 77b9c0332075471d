# Shared by the serve*.bats files (load serve): a server on a free loopback port.
# Each file's setup sets P=$BATS_TEST_TMPDIR and SPID=; its teardown calls stop_serve.

# start_serve [memra-server] [VAR=VALUE...]: serve (or $SERVE, or the memra-server
# name) on a free loopback port on the CPU (SERVE_DEVICE: another --device); sets URL,
# SPID, LOG
start_serve() {
	local cmd=${SERVE:-serve}
	LOG=$P/serve.log
	[ "${1:-}" = memra-server ] && { ln -sf "$TOP/bin/serve" "$P/memra-server"; cmd=$P/memra-server; shift; }
	env MEMRA_HOST=127.0.0.1 MEMRA_PORT=0 "$@" "$cmd" --device "${SERVE_DEVICE:-cpu}" -t 2 2>"$LOG" &
	SPID=$!
	for _ in $(seq 600); do
		grep -q 'listening on' "$LOG" && break
		kill -0 "$SPID" 2>/dev/null || { cat "$LOG" >&2; return 1; }
		sleep 0.1
	done
	URL=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$LOG")
	[ -n "$URL" ]
}

# serve_teardown: a failed test shows the last lines of its last server's log;
# that server stops
serve_teardown() {
	if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -s "${LOG:-}" ]; then
		echo "the server's log ($LOG), its last 40 lines:"
		tail -n 40 "$LOG"
	fi >&2
	stop_serve
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

# model_a_template TEMPLATE: a copy of model A in $P/a whose chat template is
# TEMPLATE (the rest linked to A's files); sets A
model_a_template() {
	A=$(model_a)
	mkdir "$P/a"
	ln -s "$A"/* "$P/a/"
	rm "$P/a/tokenizer_config.json"
	python3 - "$A/tokenizer_config.json" "$P/a/tokenizer_config.json" "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = sys.argv[3]
json.dump(c, open(sys.argv[2], "w"))
PY
}

# model_a_tools: model_a_template with a template that shows the tools and the
# XML call form (<function=NAME>, as Qwen3.5's)
model_a_tools() {
	model_a_template '{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if tools %}<tools>{{ tools | tojson }}</tools>
Call one as <tool_call>
<function=NAME>
<parameter=P>
V
</parameter>
</function>
</tool_call>
{% endif %}<|im_start|>assistant
'
}
