bats_require_minimum_version 1.5.0
# serve: structured outputs (response_format json_object / json_schema)

setup() {
	load helper
	load serve
	P=$BATS_TEST_TMPDIR
	SPID=
}

teardown() { stop_serve; }


# post PATH BODY: "STATUS BODY"
post() {
	curl -s -o "$P/body" -w '%{http_code}' -H 'Content-Type: application/json' \
	    --data-binary "$2" "$URL$1"
	printf ' %s' "$(cat "$P/body")"
}

@test "200 sampled replies under a schema and json_object, 8 at a time: every one parses and validates; the SDK's parse" {
	start_serve MEMRA_MODELS="a=$(model_a)" MEMRA_MAX_SESSIONS=8
	run -0 python3 "$TOP/t/serve-json.py" "$URL" a "$DATA/json-schema/person.json" 200
	[ "$output" = "200 valid" ]
}

@test "a schema feature serve cannot enforce is a 400 naming it; bad response_format values are 400s" {
	start_serve MEMRA_MODELS="a=$(model_a)" MEMRA_MAX_SESSIONS=2
	m='"model": "a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8'
	run -0 post /v1/chat/completions "{$m, \"response_format\": {\"type\": \"json_schema\",
	    \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"object\", \"properties\":
	    {\"id\": {\"type\": \"string\", \"pattern\": \"^a\"}}}}}}"
	[[ $output == "400 "* ]]
	[[ $output == *"'response_format.json_schema.schema': #/properties/id: 'pattern' is not supported"* ]]
	run -0 post /v1/chat/completions "{$m, \"response_format\": {\"type\": \"yaml\"}}"
	[[ $output == "400 "*"'response_format.type': 'yaml': not text, json_object or json_schema"* ]]
	run -0 post /v1/chat/completions "{$m, \"response_format\": {\"type\": \"json_schema\"}}"
	[[ $output == "400 "*"'response_format.json_schema': not an object"* ]]
	run -0 post /v1/chat/completions "{$m, \"response_format\": {\"type\": \"json_schema\",
	    \"json_schema\": {\"name\": \"a b\"}}}"
	[[ $output == "400 "*"'response_format.json_schema.name'"* ]]
	run -0 post /v1/completions '{"model": "a", "prompt": "x", "max_tokens": 8, "ignore_eos": true,
	    "response_format": {"type": "json_object"}}'
	[[ $output == "400 "*"'ignore_eos': not with 'response_format'"* ]]
	run -0 post /v1/chat/completions "{$m, \"response_format\": {\"type\": \"text\"}}"
	[[ $output == "200 "* ]]
}

@test "a reply cut by max_tokens still closes its document; a greedy one equals itself beside others" {
	start_serve MEMRA_MODELS="a=$(model_a)" MEMRA_MAX_SESSIONS=4
	b='{"model": "a", "prompt": "Data:", "max_tokens": 12, "temperature": 0,
	    "response_format": {"type": "json_object"}}'
	run -0 post /v1/completions "$b"
	[[ $output == "200 "* ]]
	one=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); c=r["choices"][0]
assert isinstance(json.loads(c["text"]), dict), c
assert r["usage"]["completion_tokens"] <= 12, r
print(c["text"])' "${output#200 }")
	pids=
	for i in 1 2 3 4; do
		curl -s -o "$P/r$i" -H 'Content-Type: application/json' --data-binary "$b" \
		    "$URL/v1/completions" & pids="$pids $!"
	done
	wait $pids
	for i in 1 2 3 4; do
		got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$P/r$i")
		[ "$got" = "$one" ]
	done
}
