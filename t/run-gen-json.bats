bats_require_minimum_version 1.5.0
# run-gen --json / --json-schema: constrained decoding on fixture model A and SmolLM2, every
# sampled reply checked by Python's json and jsonschema packages
setup() { load helper; }

SCHEMAS="$BATS_TEST_DIRNAME/data/json-schema"

# requests N PROMPT [N_TOKENS]: N --jsonl requests of PROMPT, seeds 1..N
requests() {
	python3 -c 'import json,sys; [print(json.dumps({"prompt": sys.argv[2], "seed": i, "n": int(sys.argv[3])})) for i in range(1, int(sys.argv[1]) + 1)]' "$1" "$2" "${3:-96}"
}

# halves REQ OUT ERR run-gen ARGS...: run-gen --jsonl (one thread each) over REQ's odd and
# even lines at once, a core each (each request is seeded: the split changes no reply);
# their replies into OUT, their stderr into ERR.1 and ERR.2; fails if either fails
halves() {
	local req=$1 out=$2 err=$3 pid rc=0
	shift 3
	sed -n 'p;n' "$req" >"$req.1"
	sed -n 'n;p' "$req" >"$req.2"
	"$@" <"$req.1" >"$out.1" 2>"$err.1" 3>&- &
	pid=$!
	"$@" <"$req.2" >"$out.2" 2>"$err.2" || rc=$?
	wait "$pid" || rc=$?
	cat "$out.1" "$out.2" >"$out"
	return "$rc"
}

# validate OUT N [SCHEMA]: N result lines, each text a complete JSON document (an object for
# --json, else valid under SCHEMA)
validate() {
	python3 - "$@" <<'PY'
import json, sys
import jsonschema
out, n = sys.argv[1], int(sys.argv[2])
schema = json.load(open(sys.argv[3])) if len(sys.argv) > 3 else {"type": "object"}
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
rs = [json.loads(l) for l in open(out)]
assert len(rs) == n, (len(rs), n)
texts = set()
for r in rs:
    assert r["complete"] is True, r
    doc = json.loads(r["text"])
    v.validate(doc)
    texts.add(r["text"])
assert len(texts) > n // 4, ("too few distinct replies", len(texts))
print("ok", n, "replies,", len(texts), "distinct")
PY
}

@test "--json-schema: 200 replies of model A at temperature 1 all validate (jsonschema)" {
	a=$(model_a)
	need_py jsonschema
	requests 200 '{"name"' >"$BATS_TEST_TMPDIR/req"
	halves "$BATS_TEST_TMPDIR/req" "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/err" \
	    run-gen --raw --jsonl --temp 1 -t 1 --json-schema "$SCHEMAS/rich.json" "$a"
	grep -q "^\[grammar\] $SCHEMAS/rich.json: replies keep to it" "$BATS_TEST_TMPDIR/err.1"
	grep -q "^\[grammar\] $SCHEMAS/rich.json: replies keep to it" "$BATS_TEST_TMPDIR/err.2"
	run -0 validate "$BATS_TEST_TMPDIR/out" 200 "$SCHEMAS/rich.json"
}

@test "--json: 150 replies of model A at temperature 1 are JSON objects, from prompts far from JSON" {
	a=$(model_a)
	need_py jsonschema
	{ requests 75 'import numpy as np' 48; requests 75 'def main():' 24; } >"$BATS_TEST_TMPDIR/req"
	halves "$BATS_TEST_TMPDIR/req" "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/err" \
	    run-gen --raw --jsonl --temp 1 -t 1 --json "$a"
	run -0 validate "$BATS_TEST_TMPDIR/out" 150
}

@test "--json-schema: 40 chat replies of SmolLM2 at temperature 1 all validate (jsonschema)" {
	f=$(smollm2)
	need_py jsonschema
	requests 40 'Describe a person as JSON with name, age, favorite colors and pet.' 64 \
	    >"$BATS_TEST_TMPDIR/req"
	halves "$BATS_TEST_TMPDIR/req" "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/err" \
	    run-gen --chat --jsonl --temp 1 -t 1 --json-schema "$SCHEMAS/person.json" "$f"
	run -0 validate "$BATS_TEST_TMPDIR/out" 40 "$SCHEMAS/person.json"
}

@test "--json-schema: greedy is deterministic and the text prints whole" {
	a=$(model_a)
	need_py jsonschema
	run -0 --separate-stderr run-gen --raw -t 1 -n 80 --json-schema "$SCHEMAS/person.json" "$a" '{"name"'
	first=$output
	run -0 --separate-stderr run-gen --raw -t 1 -n 80 --json-schema "$SCHEMAS/person.json" "$a" '{"name"'
	[ "$output" = "$first" ]
	printf '%s' "$output" | python3 -c 'import json,sys,jsonschema; jsonschema.validate(json.load(sys.stdin), json.load(open(sys.argv[1])))' "$SCHEMAS/person.json"
}

@test "a max_tokens too small for the schema's shortest document: incomplete, said on stderr, exit 0" {
	a=$(model_a)
	run -0 --separate-stderr run-gen --raw -t 1 -n 3 --json-schema "$SCHEMAS/rich.json" "$a" '{'
	[[ $stderr == *"run-gen: the reply stopped at 3 tokens: the JSON document is not complete"* ]]
}

@test "an unsupported schema keyword is refused by name (exit 1)" {
	a=$(model_a)
	printf '{"type": "object", "properties": {"x": {"type": "string", "pattern": "^a"}}}' \
	    >"$BATS_TEST_TMPDIR/s.json"
	run -1 --separate-stderr run-gen --raw --json-schema "$BATS_TEST_TMPDIR/s.json" "$a" 'x'
	[ "$stderr" = "run-gen: $BATS_TEST_TMPDIR/s.json: #/properties/x: 'pattern' is not supported" ]
	printf '{"type": ' >"$BATS_TEST_TMPDIR/bad.json"
	run -1 --separate-stderr run-gen --raw --json-schema "$BATS_TEST_TMPDIR/bad.json" "$a" 'x'
	[[ $stderr == "run-gen: $BATS_TEST_TMPDIR/bad.json: line 1 column "* ]]
	run -1 --separate-stderr run-gen --raw --json-schema "$BATS_TEST_TMPDIR/none.json" "$a" 'x'
	[[ $stderr == "run-gen: $BATS_TEST_TMPDIR/none.json: "* ]]
}

@test "--json excludes --json-schema, --ignore-eos and the text tools (exit 2)" {
	run -2 run-gen --json --json-schema x.json m p
	run -2 run-gen --json --ignore-eos m p
	run -2 run-gen --json --tokenize m p
	run -0 run-gen --help
	[[ $output == *"--json-schema FILE"* ]]
}
