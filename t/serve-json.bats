bats_require_minimum_version 1.5.0
# serve: structured outputs (response_format json_object / json_schema)

setup() {
	load helper
	load serve
	P=$BATS_TEST_TMPDIR
	SPID=
}

teardown() { serve_teardown; }


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

@test "strict tools: sampled calls validate in the XML and the JSON call forms, names among the tools; the SDK's parse" {
	need_py openai jsonschema pydantic
	model_a_tools
	start_serve MEMRA_MODELS="x=$P/a,j=$(model_a)" MEMRA_MAX_SESSIONS=8
	run -0 python3 "$TOP/t/serve-tools.py" "$URL" x 64
	[ "$output" = "64 valid" ]
	run -0 python3 "$TOP/t/serve-tools.py" "$URL" j 32
	[ "$output" = "32 valid" ]
}

@test "strict tools: a schema outside the subset is a 400 naming the tool and the keyword; a call cut short ends length" {
	model_a_tools
	start_serve MEMRA_MODELS="x=$P/a" MEMRA_MAX_SESSIONS=2
	m='"model": "x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8'
	ok='{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}'
	run -0 post /v1/chat/completions "{$m, \"tools\": [$ok, {\"type\": \"function\", \"function\":
	    {\"name\": \"g\", \"strict\": true, \"parameters\": {\"type\": \"object\", \"properties\":
	    {\"c\": {\"type\": \"string\", \"pattern\": \"^a\"}}}}}]}"
	[[ $output == "400 "*"'tools[1].function.parameters': #/properties/c: 'pattern' is not supported"* ]]
	run -0 post /v1/chat/completions "{$m, \"tools\": [{\"type\": \"function\", \"function\":
	    {\"name\": \"g\", \"strict\": true, \"parameters\": {\"type\": \"object\"}}}]}"
	[[ $output == "400 "*"'tools[0].function.parameters': #: a strict tool's parameters are an object with 'properties'"* ]]
	run -0 post /v1/chat/completions "{$m, \"tools\": [$ok, $ok]}"
	[[ $output == "400 "*"'tools[1].function.name': 'f' is tools[0]'s too"* ]]
	run -0 post /v1/chat/completions "{$m, \"tools\": [$ok], \"tool_choice\": \"required\",
	    \"response_format\": {\"type\": \"json_object\"}}"
	[[ $output == "400 "*"'response_format': not with a 'tool_choice' that forces a call"* ]]
	# 3 tokens are too few for the call (37 bytes at least): finish length
	run -0 post /v1/chat/completions "{\"model\": \"x\", \"messages\": [{\"role\": \"user\",
	    \"content\": \"hi\"}], \"max_tokens\": 3, \"temperature\": 0, \"tools\": [$ok],
	    \"tool_choice\": \"required\"}"
	[[ $output == "200 "* ]]
	[ "$(jq -r .choices[0].finish_reason <<<"${output#200 }")" = length ]
}

# replies PREFIX: greedy replies of model x under a schema, json_object, a strict
# tool and logprobs into $P/PREFIX.N (the text, or the calls, with the logprobs)
replies() {
	local i=0 q
	s='{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}'
	t="{\"type\": \"function\", \"function\": {\"name\": \"who\", \"strict\": true, \"parameters\": $s}}"
	for q in "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"p\", \"schema\": $s}}" \
	    '"response_format": {"type": "json_object"}, "logprobs": true, "top_logprobs": 3' \
	    "\"tools\": [$t], \"tool_choice\": \"required\"" "\"tools\": [$t], \"tool_choice\": \"auto\"" \
	    '"logprobs": true, "top_logprobs": 2'; do
		for p in "Describe a person." "Who wrote this code?"; do
			i=$((i + 1))
			post /v1/chat/completions "{\"model\": \"x\", \"messages\": [{\"role\": \"user\",
			    \"content\": \"$p\"}], \"max_tokens\": 64, \"temperature\": 0, $q}" |
			    sed 's/"id": "[^"]*"//g; s/"created": [0-9]*//; s/"call_[0-9_]*"//g' >"$P/$1.$i"
			[[ $(cat "$P/$1.$i") == "200 "* ]]
		done
	done
}

@test "a greedy session with a grammar or logprobs drafts on a speculative lane: the reply is byte for byte plain decode's" {
	model_a_tools
	start_serve MEMRA_MODELS="x=$P/a" MEMRA_SPEC_K=0
	replies plain
	stop_serve
	start_serve MEMRA_MODELS="x=$P/a" MEMRA_SPEC_K=3
	replies spec
	for i in $(seq 10); do
		cmp "$P/plain.$i" "$P/spec.$i"
	done
	curl -s "$URL/metrics" >"$P/m"
	rounds=$(awk '/^memra_spec_rounds_total/ { n += $2 } END { print n + 0 }' "$P/m")
	accepted=$(awk '/^memra_spec_accepted_tokens_total/ { n += $2 } END { print n + 0 }' "$P/m")
	[ "$rounds" -gt 0 ]
	[ "$accepted" -gt 0 ]
	grep -q '"tool_calls"' "$P/spec.5"
	grep -q '"top_logprobs"' "$P/spec.9"
}
