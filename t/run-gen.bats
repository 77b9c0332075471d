bats_require_minimum_version 1.5.0
# run-gen end to end on fixture model A (HF checkpoint, refs.json) and SmolLM2 (GGUF)
setup() { load helper; }

# golden_greedy GOLDEN [RUN-GEN OPTIONS]: SmolLM2's greedy ids (32 per prompt, run-gen --jsonl, so
# the prompts prefill one by one and the decode steps run as one batch of sequences) equal
# llama.cpp's golden t/data/GOLDEN on every prompt.
golden_greedy() {
	local f g=$DATA/$1
	shift
	f=$(smollm2)
	need_py json
	python3 -c 'import json,sys; [print(json.dumps({"prompt": p["text"], "n": 32})) for p in json.load(open(sys.argv[1]))["prompts"]]' "$g" |
	    run-gen --raw --jsonl "$@" -t 2 "$f" >"$BATS_TEST_TMPDIR/out" 2>/dev/null
	run -0 python3 - "$g" "$BATS_TEST_TMPDIR/out" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["prompts"]
r = [json.loads(l) for l in open(sys.argv[2])]
assert len(r) == len(g) == 8, len(r)
for p, o in zip(g, r):
    assert o["ids"] == p["greedy_ids"], (p["name"], o["ids"], p["greedy_ids"])
print("ok")
PY
}

# refs KEY...: print refs.json b_greedy[0] fields (prompt text from prompts.jsonl)
ref0() {
	python3 - "$1" "$2" <<'PY'
import json, sys
d, what = sys.argv[1], sys.argv[2]
b = json.load(open(d + "/refs.json"))["b_greedy"][0]
if what == "prompt":
    sys.stdout.write(json.loads(open(d + "/prompts.jsonl").readline())["prompt"])
elif what == "ids":
    print(" ".join(map(str, b["new_ids"])))
else:
    sys.stdout.write(b["text"])
PY
}

@test "greedy ids on model A equal refs.json b_greedy[0] (64 tokens, raw prompt)" {
	d=$(model_a)
	ref0 "$d" prompt >"$BATS_TEST_TMPDIR/p.txt"
	run -0 --separate-stderr run-gen --raw --ids -n 64 -t 2 -f "$BATS_TEST_TMPDIR/p.txt" "$d"
	[ "$output" = "$(ref0 "$d" ids)" ]
	[[ $stderr == *"prefill argmax="*" MATCH"* ]]
	[[ $stderr == *"prompt tokens=169 "* ]]
}

@test "greedy text on model A is the reference's text byte for byte, streamed from stdin" {
	d=$(model_a)
	ref0 "$d" prompt >"$BATS_TEST_TMPDIR/p.txt"
	ref0 "$d" text >"$BATS_TEST_TMPDIR/want"
	echo >>"$BATS_TEST_TMPDIR/want"
	run-gen --raw -n 64 -t 2 "$d" <"$BATS_TEST_TMPDIR/p.txt" >"$BATS_TEST_TMPDIR/got" 2>/dev/null
	cmp "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got"
}

@test "the gate line comes before the stats line, both on stderr" {
	d=$(model_a)
	run -0 --separate-stderr run-gen -n 4 -t 2 "$d" "hi"
	[[ ${stderr_lines[0]} =~ ^prefill\ argmax=[0-9]+\ decode\ argmax=[0-9]+\ maxdiff=[0-9.e+-]+\ (MATCH|NEAR-TIE)$ ]]
	[[ ${stderr_lines[1]} =~ ^prompt\ tokens=[0-9]+\ prefill\ [0-9.]+\ tok/s,\ decode\ [0-9.]+\ tok/s\ \(4\ tokens\),\ time\ to\ first\ token\ [0-9.]+\ s$ ]]
}

@test "--chat applies the template: the prompt is longer than --raw's" {
	d=$(model_a)
	run -0 --separate-stderr run-gen --chat -n 1 -t 2 "$d" "hi"
	chat=$stderr
	run -0 --separate-stderr run-gen --raw -n 1 -t 2 "$d" "hi"
	[[ $chat == *"prompt tokens=11 "* ]]	# HF tokenizers: 11 ids for refs.json's chat_template_render
	[[ $stderr == *"prompt tokens=1 "* ]]
}

@test "a sampled run is reproducible with its seed and differs with another" {
	d=$(model_a)
	run -0 --separate-stderr run-gen --ids --temp 1 --top-k 40 --seed 5 -n 24 -t 2 "$d" "Once upon a time"
	a=$output
	run -0 --separate-stderr run-gen --ids --temp 1 --top-k 40 --seed 5 -n 24 -t 1 "$d" "Once upon a time"
	[ "$output" = "$a" ]
	run -0 --separate-stderr run-gen --ids --temp 1 --top-k 40 --seed 6 -n 24 -t 2 "$d" "Once upon a time"
	[ "$output" != "$a" ]
}

@test "--jsonl runs a batch: one result per request, the same ids as a single run" {
	d=$(model_a)
	run -0 --separate-stderr run-gen --ids -n 8 -t 2 "$d" "The sky is"
	one=$output
	printf '%s\n' '{"prompt": "The sky is", "n": 8}' '' '{"prompt": "hi", "n": 3, "temp": 0.7, "seed": 1}' |
	    run-gen --jsonl -t 2 "$d" >"$BATS_TEST_TMPDIR/out" 2>/dev/null
	[ "$(wc -l <"$BATS_TEST_TMPDIR/out")" = 2 ]
	need_py json
	run -0 python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(" ".join(map(str, r[0]["ids"]))); assert len(r[1]["ids"]) <= 3 and r[0]["gate"] == "MATCH"' "$BATS_TEST_TMPDIR/out"
	[ "$output" = "$one" ]
}

@test "a bad request line fails that line only, exit 1" {
	d=$(model_a)
	printf '%s\n' '{"n": 2}' '{"prompt": "hi", "n": 2}' >"$BATS_TEST_TMPDIR/in"
	run -1 --separate-stderr run-gen --jsonl -t 2 "$d" <"$BATS_TEST_TMPDIR/in"
	[ "${#lines[@]}" = 1 ]
	[[ $stderr == *"run-gen: stdin: line 1: request has no \"prompt\" string"* ]]
}

@test "SmolLM2 GGUF: tokenizer and chat template from its metadata, gate MATCH" {
	f=$(smollm2)
	run -0 --separate-stderr run-gen -n 8 -t 2 "$f" "What is 2+2?"
	[[ $stderr == *" MATCH"* ]]
	[ -n "$output" ]
}

@test "misuse exits 2: out-of-range values are never clamped" {
	run -2 run-gen -n 0 m p
	run -2 run-gen --top-p 1.5 m p
	run -2 run-gen --temp -1 m p
	run -2 run-gen --device tpu m p
	run -2 run-gen
	run -2 run-gen --jsonl m p
}

@test "a missing model fails with 1 and names it" {
	run -1 --separate-stderr run-gen "$BATS_TEST_TMPDIR/nope" hi
	[[ $stderr == "run-gen: $BATS_TEST_TMPDIR/nope"* ]]
}

@test "--help prints the usage that matches the man page SYNOPSIS" {
	run -0 run-gen --help
	[[ ${lines[0]} == "usage: run-gen [--chat | --raw] [--ids] [--jsonl]"* ]]
	# the second form's line, wherever the first form's lines end
	printf '%s\n' "${lines[@]}" | grep -qx "       run-gen --tokenize \[--special\] | --detokenize | --template \[-f FILE\] model \[input\]"
}

@test "SmolLM2 greedy ids equal llama.cpp's (llama-cpp-python, its default F16 cache) on a raw prompt" {
	f=$(smollm2)
	need_llama_cpp
	run -0 --separate-stderr python3 "$TOP/t/peer/llama_greedy.py" "$f" 16 "The capital of France is"
	want=$output
	run -0 --separate-stderr run-gen --raw --ids -n 16 -t 2 --kv-type f16 "$f" "The capital of France is"
	[ "$output" = "$want" ]
}

@test "a masked draft head loads with its proof line and leaves the output as it was" {
	d=$(model_a)
	printf '5\n8191\n0\n100\n' >"$BATS_TEST_TMPDIR/r.txt"
	run -0 --separate-stderr run-gen --raw --ids -n 8 -t 2 "$d" "Once upon a time"
	want=$output
	MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/r.txt run -0 --separate-stderr run-gen --raw --ids -n 8 -t 2 "$d" "Once upon a time"
	[ "$output" = "$want" ]
	[ "${stderr_lines[0]}" = "[frspec-trim] self-trimmed head: 4 rows of main output.weight (BF16)" ]
	MEMRA_FULL_PREC=1 MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/r.txt run -0 --separate-stderr run-gen --raw --ids -n 8 -t 2 "$d" "Once upon a time"
	[[ $stderr != *"[frspec-trim]"* ]]
	MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/none.txt run -1 --separate-stderr run-gen -n 8 "$d" hi
	[[ $stderr == "run-gen: $d: frspec trim: $BATS_TEST_TMPDIR/none.txt: "* ]]
	MEMRA_MTP_DRAFT=$BATS_TEST_TMPDIR/none.gguf run -1 --separate-stderr run-gen -n 8 "$d" hi
	[ "${stderr_lines[0]}" = "[mtp-draft] loading external MTP draft: $BATS_TEST_TMPDIR/none.gguf" ]
	[[ ${stderr_lines[1]} == "run-gen: $BATS_TEST_TMPDIR/none.gguf: "* ]]
}

@test "SmolLM2: our prompt ids are llama.cpp's for the 8 golden prompts (special tokens parsed)" {
	f=$(smollm2)
	need_py json
	tc=$TOP/build/t/tools/tok-cli
	[ -x "$tc" ] || skip "build/t/tools/tok-cli not built (make units)"
	for i in 0 1 2 3 4 5 6 7; do
		python3 -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["prompts"][int(sys.argv[2])]["text"])' "$DATA/smollm2-llamacpp.json" $i >"$BATS_TEST_TMPDIR/p"
		want=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["prompts"][int(sys.argv[2])]["prompt_ids"])))' "$DATA/smollm2-llamacpp.json" $i)
		run -0 --separate-stderr "$tc" -s -a encode "$f" "$BATS_TEST_TMPDIR/p"
		[ "$output" = "$want" ]
	done
}

# A llama GGUF runs with llama.cpp's CPU numerics (its x86 AVX-512 build, where the goldens were
# made; the ops are in bench/2026-12-01/2026-12-01-llamacpp-numerics.md): Q8_0/Q8_1 activations as its
# quantize_row, RMSNorm summed in double, its RoPE angles, its exp in SiLU and softmax, and the
# attention sums in the orders of its kernels, sgemm's for a prompt batch and vec_dot's for one
# row.  Measured with tools/llamacpp-compare.py: along llama.cpp's path of all 8 prompts, as one
# batch and as prompt then one token at a time, our logits are llama.cpp's bit for bit, with
# either cache.
@test "SmolLM2 greedy ids equal llama.cpp's F32-cache golden (t/data/smollm2-llamacpp-f32.json), 8 prompts" {
	golden_greedy smollm2-llamacpp-f32.json
}

@test "--kv-type f16: SmolLM2 greedy ids equal llama.cpp's golden (its default F16 cache), 8 prompts" {
	golden_greedy smollm2-llamacpp.json --kv-type f16
}

@test "SmolLM2 first-step top-5 logits equal llama.cpp's to 1e-4 with either cache, and the caches differ" {
	f=$(smollm2)
	need_py numpy
	run -0 python3 - "$DATA" "$TOP/build/t/tools/model-logits" "$f" <<'PY'
import json, subprocess, sys
import numpy as np
data, tool, f = sys.argv[1:]
last = {}
for kv, g in (("f16", "smollm2-llamacpp.json"), ("f32", "smollm2-llamacpp-f32.json")):
    for p in json.load(open(f"{data}/{g}"))["prompts"]:
        out = subprocess.run([tool, "-t", "2", "-k", kv, f, "-"] + [str(t) for t in p["prompt_ids"]],
                             capture_output=True, check=True).stdout
        lg = np.frombuffer(out, dtype=np.float32).reshape(len(p["prompt_ids"]), -1)[-1]
        d = np.abs(lg[p["top5_ids"]] - np.array(p["top5_logits"])).max()
        assert d <= 1e-4, (kv, p["name"], d)
        last.setdefault(p["name"], []).append(lg)
for name, (a, b) in last.items():
    assert (a != b).any(), name
print("ok")
PY
}

# The same against the live peer (t/peer/llamacpp-build.sh: GGML_NATIVE, so its kernels are the
# host's).  Where it runs ggml's AVX-512 kernels, which memra's llama numerics are, its logits along
# the golden paths (prompt as a batch, then one token at a time) must be ours bit for bit; on another
# host (AVX2 only: 8-lane sums, another exp) only the argmaxes must agree, but at a near tie (llama.cpp's
# top-2 margin below 0.5), which is logged.
@test "SmolLM2 logits equal the live llama.cpp's bit for bit on its AVX-512 build (else argmaxes, but at near ties)" {
	f=$(smollm2)
	need_llama_cpp
	for kv in f16 f32; do
		run -0 --separate-stderr python3 "$TOP/tools/llamacpp-compare.py" --check \
		    --prompts raw-code-add,chat-prose --ways gen "$f" "$DATA/smollm2-llamacpp.json" \
		    "$TOP/build/t/tools/model-logits" $kv
		[ "${#lines[@]}" -eq 3 ]
		if [ "${lines[0]}" = "peer: avx512" ]; then
			[[ ${lines[1]} == "raw-code-add gen: maxdiff 0 over 33 steps" ]]
			[[ ${lines[2]} == "chat-prose gen: maxdiff 0 over 30 steps" ]]
		else
			printf '# %s cache, %s: %s\n' $kv "${lines[0]:0:12}" "${lines[*]:1}" >&3
		fi
	done
}

@test "--kv-type and MEMRA_KV_TYPE: f32 or f16, anything else is misuse; the flag wins" {
	f=$(smollm2)
	run -2 --separate-stderr run-gen --kv-type f8 "$f" "hi"
	[[ "$stderr" == "run-gen: "*"'f8'"* ]]
	MEMRA_KV_TYPE=bf16 run -2 --separate-stderr run-gen "$f" "hi"
	[ "$stderr" = "run-gen: MEMRA_KV_TYPE: 'bf16': not f32 or f16" ]
	run -0 --separate-stderr run-gen --raw --ids -n 4 -t 2 --kv-type f16 "$f" "The capital of France is"
	want=$output
	MEMRA_KV_TYPE=f16 run -0 --separate-stderr run-gen --raw --ids -n 4 -t 2 "$f" "The capital of France is"
	[ "$output" = "$want" ]
	MEMRA_KV_TYPE=bf16 run -0 --separate-stderr run-gen --raw --ids -n 4 -t 2 --kv-type f16 "$f" "The capital of France is"
	[ "$output" = "$want" ]
}

@test "generation stops on generation_config.json's eos_token_id (a number or a list)" {
	d=$(model_a)
	run -0 --separate-stderr run-gen --raw --ids -n 6 -t 2 "$d" "Once upon a time"
	read -r -a ids <<<"$output"
	[ "${#ids[@]}" = 6 ]
	mkdir "$BATS_TEST_TMPDIR/m"
	for f in "$d"/*; do ln -s "$f" "$BATS_TEST_TMPDIR/m/"; done
	printf '{"eos_token_id": [1, %s]}\n' "${ids[3]}" >"$BATS_TEST_TMPDIR/m/generation_config.json"
	run -0 --separate-stderr run-gen --raw --ids -n 6 -t 2 "$BATS_TEST_TMPDIR/m" "Once upon a time"
	[ "$output" = "${ids[*]:0:3}" ]
	printf '{"eos_token_id": %s}\n' "${ids[1]}" >"$BATS_TEST_TMPDIR/m/generation_config.json"
	run -0 --separate-stderr run-gen --raw --ids -n 6 -t 2 "$BATS_TEST_TMPDIR/m" "Once upon a time"
	[ "$output" = "${ids[0]}" ]
}

@test "--ignore-eos and \"ignore_eos\": true generate exactly -n tokens past a stop token" {
	d=$(model_a)
	need_py json
	run -0 --separate-stderr run-gen --raw --ids -n 6 -t 2 "$d" "Once upon a time"
	want=$output
	read -r -a ids <<<"$output"
	mkdir "$BATS_TEST_TMPDIR/m"
	for f in "$d"/*; do ln -s "$f" "$BATS_TEST_TMPDIR/m/"; done
	printf '{"eos_token_id": %s}\n' "${ids[1]}" >"$BATS_TEST_TMPDIR/m/generation_config.json"
	run -0 --separate-stderr run-gen --raw --ids -n 6 -t 2 "$BATS_TEST_TMPDIR/m" "Once upon a time"
	[ "$output" = "${ids[0]}" ]
	run -0 --separate-stderr run-gen --raw --ids --ignore-eos -n 6 -t 2 "$BATS_TEST_TMPDIR/m" "Once upon a time"
	[ "$output" = "$want" ]
	[[ $stderr == *" (6 tokens), "* ]]
	p=$(a_ids "Once upon a time")
	printf '%s\n' "{\"prompt\": [$p], \"n\": 6}" "{\"prompt\": [$p], \"n\": 6, \"ignore_eos\": true}" >"$BATS_TEST_TMPDIR/in"
	run -0 --separate-stderr run-gen --jsonl -t 2 "$BATS_TEST_TMPDIR/m" <"$BATS_TEST_TMPDIR/in"
	run -0 python3 -c 'import json,sys; a, b = map(json.loads, sys.argv[1:3]); print(len(a["ids"]), " ".join(map(str, b["ids"])))' "${lines[0]}" "${lines[1]}"
	[ "$output" = "1 $want" ]
	echo "{\"prompt\": [$p], \"n\": 6, \"ignore_eos\": false}" >"$BATS_TEST_TMPDIR/in"
	run -0 --separate-stderr run-gen --ignore-eos --jsonl -t 2 "$BATS_TEST_TMPDIR/m" <"$BATS_TEST_TMPDIR/in"	# the request wins
	[[ $output == *'"ids": ['"${ids[0]}"'], '* ]]
}

@test "generation stops on a GGUF's tokenizer.ggml.eot_token_id" {
	f=$(smollm2)
	need_py gguf
	run -0 --separate-stderr run-gen --raw --ids -n 6 -t 2 "$f" "The capital of France is"
	[ "$output" = "7042 30 198 198 504 2988" ]	# llama.cpp's too (t/data/smollm2-llamacpp-f32.json)
	python3 -m gguf.scripts.gguf_new_metadata --special-token-by-id eot 198 "$f" "$BATS_TEST_TMPDIR/m.gguf" >/dev/null 2>&1
	run -0 --separate-stderr run-gen --raw --ids -n 6 -t 2 "$BATS_TEST_TMPDIR/m.gguf" "The capital of France is"
	[ "$output" = "7042 30" ]
}

@test "the generated text's line ends before the stats line when both go to one file" {
	d=$(model_a)
	run-gen -n 4 -t 2 "$d" "hi" >"$BATS_TEST_TMPDIR/both" 2>&1
	grep -q '^prompt tokens=' "$BATS_TEST_TMPDIR/both"
}

# --- token-id prompts, models without a tokenizer ---

# ids TEXT: model A's ids of TEXT as --tokenize --special prints them, comma-separated
a_ids() { run-gen --tokenize --special "$(model_a)" "$1" | paste -sd, -; }

@test "--jsonl {\"prompt\": [ids]}: the ids --tokenize gives make the tokens and text of the --raw text prompt" {
	d=$(model_a)
	need_py json
	ids=$(a_ids "The sky is")
	[ "$ids" = "2196,2887,88,331" ]
	printf '%s\n' '{"prompt": "The sky is", "n": 8}' "{\"prompt\": [$ids], \"n\": 8}" |
	    run-gen --raw --jsonl -t 2 "$d" >"$BATS_TEST_TMPDIR/raw" 2>/dev/null
	# without --raw the text is templated, the ids never are (and get no BOS)
	printf '%s\n' '{"prompt": "The sky is", "n": 8}' "{\"prompt\": [$ids], \"n\": 8}" |
	    run-gen --jsonl -t 2 "$d" >"$BATS_TEST_TMPDIR/chat" 2>/dev/null
	run -0 python3 - "$BATS_TEST_TMPDIR/raw" "$BATS_TEST_TMPDIR/chat" <<'PY'
import json, sys
t, i = [json.loads(l) for l in open(sys.argv[1])]
assert list(t) == list(i) and list(t)[:2] == ["text", "ids"], (list(t), list(i))
assert len(t["ids"]) == 8 and t["ids"] == i["ids"] and t["text"] == i["text"], (t, i)
assert t["prompt_tokens"] == i["prompt_tokens"] == 4 and i["gate"] == "MATCH"
c, ci = [json.loads(l) for l in open(sys.argv[2])]
assert c["prompt_tokens"] > 4 and ci["prompt_tokens"] == 4 and ci["ids"] == i["ids"], (c, ci)
print("ok")
PY
}

@test "id prompts go in as they are: tiny q35-r2's first greedy token is transformers' argmax on its 3 sequences" {
	need_py json
	python3 -c 'import json,sys; [print(json.dumps({"prompt": s["input_ids"], "n": 1})) for s in json.load(open(sys.argv[1]))["sequences"]]' \
	    "$DATA/tiny/q35-r2/refs.json" | run-gen --jsonl -t 2 "$DATA/tiny/q35-r2" >"$BATS_TEST_TMPDIR/out" 2>/dev/null
	run -0 python3 - "$DATA/tiny/q35-r2/refs.json" "$BATS_TEST_TMPDIR/out" <<'PY'
import json, sys
seqs = json.load(open(sys.argv[1]))["sequences"]
got = [json.loads(l) for l in open(sys.argv[2])]
assert len(got) == len(seqs) == 3
for s, g in zip(seqs, got):
    lg = s["logits"][-1]
    assert g["ids"] == [max(range(len(lg)), key=lg.__getitem__)], g
    assert g["prompt_tokens"] == len(s["input_ids"]) and "text" not in g, g
print("ok")
PY
}

@test "bad id prompts fail their own line with 1, each with a one-line reason" {
	d=$(model_a)
	printf '%s\n' '{"prompt": [1, 8192]}' '{"prompt": [-1]}' '{"prompt": [1, 2.5]}' '{"prompt": ["7"]}' \
	    '{"prompt": []}' '{"prompt": [[3]]}' '{"prompt": {"ids": [3]}}' '{"prompt": [3], "n": 2}' \
	    '{"prompt": [3], "ignore_eos": "yes"}' >"$BATS_TEST_TMPDIR/in"
	run -1 --separate-stderr run-gen --jsonl -t 2 "$d" <"$BATS_TEST_TMPDIR/in"
	[ "${#lines[@]}" = 1 ]
	[[ ${lines[0]} == '{"text": '*', "prompt_tokens": 1, "gate": "MATCH", '* ]]
	e=$(grep '^run-gen: ' <<<"$stderr")
	[ "$e" = 'run-gen: stdin: line 1: "prompt"[1]: id 8192 is outside the vocabulary (8192 tokens)
run-gen: stdin: line 2: "prompt"[0]: id -1 is outside the vocabulary (8192 tokens)
run-gen: stdin: line 3: "prompt"[1]: 2.5 is not an integer token id
run-gen: stdin: line 4: "prompt"[0]: a string is not an integer token id
run-gen: stdin: line 5: "prompt": an empty array of token ids
run-gen: stdin: line 6: "prompt"[0]: an array is not an integer token id
run-gen: stdin: line 7: request has no "prompt" string or array of token ids
run-gen: stdin: line 9: "ignore_eos": not true or false' ]
}

@test "a model without a tokenizer (HF dir, gguf-random -V) runs id prompts: ids, no \"text\"" {
	need_py json
	G=$TOP/build/t/tools/gguf-random
	[ -x "$G" ] || skip "build/t/tools/gguf-random not built (make units)"
	"$G" -V -p tiny "$BATS_TEST_TMPDIR/r.gguf"
	! gguf-inspect "$BATS_TEST_TMPDIR/r.gguf" | grep -q tokenizer || false
	for m in "$DATA/tiny/q35-r2" "$BATS_TEST_TMPDIR/r.gguf"; do
		printf '%s\n' '{"prompt": [5, 17, 250], "n": 6, "ignore_eos": true}' '{"prompt": "hi"}' >"$BATS_TEST_TMPDIR/in"
		run -1 --separate-stderr run-gen --jsonl -t 2 "$m" <"$BATS_TEST_TMPDIR/in"
		[ "${#lines[@]}" = 1 ]
		run -0 python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert list(r)[0] == "ids" and len(r["ids"]) == 6 and r["prompt_tokens"] == 3 and r["gate"] == "MATCH", r' "${lines[0]}"
		[[ $stderr == *"run-gen: stdin: line 2: $m: no tokenizer: give the prompt as token ids"* ]]
	done
}

@test "a model without a tokenizer refuses a text prompt and the text tools with 1, saying so" {
	m=$DATA/tiny/q35-r2	# an HF checkpoint without tokenizer.json
	run -1 --separate-stderr run-gen --raw -n 2 -t 2 "$m" "hi"
	[ "$stderr" = "run-gen: $m: no tokenizer: give prompts as token ids (--jsonl {\"prompt\": [ids]})" ]
	[ -z "$output" ]
	run -1 --separate-stderr run-gen --chat -n 2 -t 2 "$m" "hi"
	[ "$stderr" = "run-gen: $m: no tokenizer, so no chat template to apply" ]
	run -1 --separate-stderr run-gen --tokenize "$m" "hi"
	[ "$stderr" = "run-gen: $m: no tokenizer" ]
	run -1 --separate-stderr run-gen --detokenize "$m" <<<'1 2'
	[ "$stderr" = "run-gen: $m: no tokenizer" ]
}

# --- the text tools: tokenizer and chat template, no weights ---

# a text with prose, code, CJK, emoji, digits, CRLF and a special token
tool_text() { printf 'Hello, world! 1234567 def f(x):\r\n\treturn x  # 天气 🌦 café\n<|im_end|> done\n'; }

@test "--tokenize --special on model A gives the ids HF tokenizers gives, one a line" {
	need_py tokenizers
	d=$(model_a)
	tool_text >"$BATS_TEST_TMPDIR/t.txt"
	run -0 --separate-stderr run-gen --tokenize --special "$d" <"$BATS_TEST_TMPDIR/t.txt"
	want=$(python3 -c 'import sys; from tokenizers import Tokenizer; t=Tokenizer.from_file(sys.argv[1]+"/tokenizer.json"); print("\n".join(map(str, t.encode(open(sys.argv[2], newline="").read(), add_special_tokens=False).ids)))' "$d" "$BATS_TEST_TMPDIR/t.txt")
	[ "$output" = "$want" ]
	[ -z "$stderr" ]
}

@test "--tokenize on SmolLM2 gives llama.cpp's ids; a special token's text stays text without --special" {
	f=$(smollm2)
	need_llama_cpp	# the peer t/all.sh builds from the sdist
	tool_text >"$BATS_TEST_TMPDIR/t.txt"
	for sp in 0 1; do
		run -0 --separate-stderr run-gen --tokenize $([ $sp = 1 ] && echo --special) "$f" <"$BATS_TEST_TMPDIR/t.txt"
		want=$(python3 -c 'import sys; from llama_cpp import Llama; m=Llama(sys.argv[1], vocab_only=True, verbose=False); print("\n".join(map(str, m.tokenize(open(sys.argv[2],"rb").read(), add_bos=False, special=sys.argv[3]=="1"))))' "$f" "$BATS_TEST_TMPDIR/t.txt" $sp)
		[ "$output" = "$want" ]
		if [ "$sp" = 1 ]; then
			[[ $'\n'$output$'\n' == *$'\n2\n'* ]]	# <|im_end|> is id 2
		else
			[[ $'\n'$output$'\n' != *$'\n2\n'* ]]
		fi
	done
}

@test "--detokenize gives back the text --tokenize read, byte for byte (GGUF and HF dir)" {
	tool_text >"$BATS_TEST_TMPDIR/t.txt"
	for m in "$(smollm2)" "$(model_a)"; do
		run-gen --tokenize --special "$m" <"$BATS_TEST_TMPDIR/t.txt" >"$BATS_TEST_TMPDIR/ids"
		[ "$(wc -l <"$BATS_TEST_TMPDIR/ids")" -gt 10 ]
		tr '\n' ' ' <"$BATS_TEST_TMPDIR/ids" | run-gen --detokenize "$m" >"$BATS_TEST_TMPDIR/back"
		cmp "$BATS_TEST_TMPDIR/t.txt" "$BATS_TEST_TMPDIR/back"
	done
}

@test "--detokenize rejects what is not a token id, and an id past the vocabulary" {
	f=$(smollm2)
	run -1 --separate-stderr run-gen --detokenize "$f" <<<'1 2 x3'
	[ "$stderr" = "run-gen: 'x3': not a token id" ]
	run -1 --separate-stderr run-gen --detokenize "$f" <<<'1 999999'
	[ -n "$stderr" ]
	[ -z "$output" ]
}

# the conversation --template tests render: system, tools, a tool call and its result
tool_conv() {
	cat <<'JSON'
{"messages": [{"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Weather in Paris?"},
  {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
  {"role": "tool", "content": "{\"temp\": 21}"},
  {"role": "assistant", "content": "21°C."}, {"role": "user", "content": "Thanks"}],
 "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
 "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<B>", "eos_token": "<E>"}
JSON
}

@test "--template on model A renders the checkpoint's template as jinja2 does on a conversation with tools and a tool result" {
	need_py jinja2
	d=$(model_a)
	tool_conv >"$BATS_TEST_TMPDIR/c.json"
	python3 -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["chat_template"])' "$d/tokenizer_config.json" >"$BATS_TEST_TMPDIR/t.jinja"
	python3 "$TOP/tools/chat-render.py" "$BATS_TEST_TMPDIR/t.jinja" "$BATS_TEST_TMPDIR/c.json" >"$BATS_TEST_TMPDIR/want"
	run-gen --template "$d" <"$BATS_TEST_TMPDIR/c.json" >"$BATS_TEST_TMPDIR/got"
	cmp "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got"
	grep -q 'Be brief' "$BATS_TEST_TMPDIR/got"
}

@test "--template on SmolLM2 passes the vocabulary's bos_token and eos_token when the input has none" {
	need_py jinja2
	need_py gguf
	f=$(smollm2)
	python3 - "$f" "$BATS_TEST_TMPDIR" <<'PY'
import json, sys
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
def s(k):
    x = r.fields[k]
    return bytes(x.parts[x.data[0]]).decode()
def tok(k):
    x = r.fields["tokenizer.ggml.tokens"]
    return bytes(x.parts[x.data[int(r.fields[k].parts[-1][0])]]).decode()
d = sys.argv[2]
open(d + "/t.jinja", "w", newline="").write(s("tokenizer.chat_template"))
conv = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}
json.dump(conv, open(d + "/in.json", "w"))
conv.update(bos_token=tok("tokenizer.ggml.bos_token_id"), eos_token=tok("tokenizer.ggml.eos_token_id"))
json.dump(conv, open(d + "/c.json", "w"))
PY
	python3 "$TOP/tools/chat-render.py" "$BATS_TEST_TMPDIR/t.jinja" "$BATS_TEST_TMPDIR/c.json" >"$BATS_TEST_TMPDIR/want"
	run-gen --template "$f" <"$BATS_TEST_TMPDIR/in.json" >"$BATS_TEST_TMPDIR/got"
	cmp "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got"
}

@test "--template fails on input that is not a JSON object, naming it" {
	f=$(smollm2)
	run -1 --separate-stderr run-gen --template "$f" <<<'[1, 2]'
	[ "$stderr" = "run-gen: input: not a JSON object" ]
	run -1 --separate-stderr run-gen --template "$f" <<<'{"messages": '
	[[ $stderr == "run-gen: input: "* ]]
}

@test "the text tools exclude each other, --jsonl, and --special without --tokenize (exit 2)" {
	f=$(smollm2)
	run -2 --separate-stderr run-gen --tokenize --detokenize "$f"
	run -2 --separate-stderr run-gen --template --jsonl "$f"
	run -2 --separate-stderr run-gen --special "$f" hi
	run -2 --separate-stderr run-gen --detokenize --special "$f"
}

# knob VAR WHY BAD GOOD: each of VAR's values in BAD ('|' between them) is
# misuse ("run-gen: VAR: 'v': WHY"); each in GOOD, and "", gives run-gen's
# greedy ids on SmolLM2 unchanged (a CUDA kernel's choice: the same bits, and
# a no-op on the CPU)
knob() {
	local var=$1 why=$2 v want f bad good
	IFS='|' read -ra bad <<<"$3"
	IFS='|' read -ra good <<<"$4"
	f=$(smollm2)
	for v in "${bad[@]}"; do
		run -2 --separate-stderr env "$var=$v" run-gen --device cpu --raw -n 2 "$f" "hi"
		[ "$stderr" = "run-gen: $var: '$v': $why" ]
	done
	run -0 --separate-stderr run-gen --device cpu --raw --ids -n 3 -t 2 "$f" "hi"
	want=$output
	for v in "${good[@]}" ""; do
		run -0 --separate-stderr env "$var=$v" run-gen --device cpu --raw --ids -n 3 -t 2 "$f" "hi"
		[ "$output" = "$want" ]
	done
}

@test "MEMRA_CUDA_GRAPH: 0, 1 or stats (the counts at exit: none on the CPU); anything else is misuse" {
	f=$(smollm2)
	MEMRA_CUDA_GRAPH=yes run -2 --separate-stderr run-gen --device cpu --raw -n 2 "$f" "hi"
	[ "$stderr" = "run-gen: MEMRA_CUDA_GRAPH: 'yes': not 0, 1 or stats" ]
	MEMRA_CUDA_GRAPH=stats run -0 --separate-stderr run-gen --device cpu --raw --ids -n 2 -t 2 "$f" "hi"
	[ "${stderr##*$'\n'}" = "run-gen: cuda graph: 0 recorded, 0 replayed, 0 stale (graphs off)" ]
	MEMRA_CUDA_GRAPH=0 run -0 --separate-stderr run-gen --device cpu --raw --ids -n 2 -t 2 "$f" "hi"
	[[ "$stderr" != *"cuda graph"* ]]
}

@test "MEMRA_CUDA_STEP_ROWS: 16 or 32 (the same ids; the CPU's steps stay 32); anything else is misuse" {
	knob MEMRA_CUDA_STEP_ROWS "not 16 or 32" "8|64|sixteen| 16" "16|32"
}

@test "MEMRA_CUDA_MOE_GROUP: 0, 1, all or cc (the same ids; a no-op on the CPU); anything else is misuse" {
	knob MEMRA_CUDA_MOE_GROUP "not 0, 1, all or cc" "2|yes|ALL| 1|tc|CC" "0|1|all|cc"
}

@test "MEMRA_CUDA_QKT: 0, 1 or auto (the same ids; a no-op on the CPU); anything else is misuse" {
	knob MEMRA_CUDA_QKT "not 0, 1 or auto" "2|yes|AUTO| 1" "0|1|auto"
}

@test "MEMRA_CUDA_QK_STAGE: 0 or 1 (the same ids; a no-op on the CPU); anything else is misuse" {
	knob MEMRA_CUDA_QK_STAGE "not 0 or 1" "2|yes|on| 1" "0|1"
}

@test "MEMRA_CUDA_Q6K_PACK: 0 or 1 (the same ids; a no-op on the CPU); anything else is misuse" {
	knob MEMRA_CUDA_Q6K_PACK "not 0 or 1" "2|yes|on| 1" "0|1"
}

@test "MEMRA_CUDA_PDL: 0 or 1 (the same ids; a no-op on the CPU); anything else is misuse" {
	knob MEMRA_CUDA_PDL "not 0 or 1" "yes" "0|1"
}
