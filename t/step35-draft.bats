bats_require_minimum_version 1.5.0
# step35's NextN blocks in a GGUF of their own, attached as MODEL+DRAFT: D is llama.cpp's
# --mtp conversion of fixture step-n (t/data/step35/step-n/llamacpp-mtp.gguf, made by
# tools/make-step35-draft.py), E the trunk quant-nvfp4 writes with the blocks embedded,
# T the trunk alone (--no-mtp, as llama.cpp's --no-mtp writes it); trim-head's drafts of
# either.  The blocks are random: greedy drafts are never accepted (run-spec then exits
# 1, as it does for the embedded chain), sampled ones are.

setup_file() {
	load helper
	export E="$BATS_FILE_TMPDIR/e.gguf" T="$BATS_FILE_TMPDIR/t.gguf"
	quant-nvfp4 -t 2 --type F32 "$DATA/step35/step-n" "$E" 2>/dev/null
	quant-nvfp4 -t 2 --type F32 --no-mtp "$DATA/step35/step-n" "$T" 2>/dev/null
}

setup() {
	load helper
	load serve
	D=$DATA/step35/step-n/llamacpp-mtp.gguf
	P=$BATS_TEST_TMPDIR
	SPID=
	NX=$TOP/build/t/tools/model-nextn
	[ -x "$NX" ] || skip "build/t/tools not built (make units)"
	IDS='{"prompt": [5, 17, 250, 3, 99, 42, 7, 1, 11, 12]}'
	NIDS=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["nextn"]["input_ids"])))' "$DATA/step35/step-n/refs.json")
	HEADS='blk.4.nextn.shared_head_head.weight,blk.5.nextn.shared_head_head.weight,blk.6.nextn.shared_head_head.weight'
}

teardown() { serve_teardown; }

# spec MODEL [run-spec options]: run-spec's K=1..8 report on IDS (24 tokens) without its
# speeds, its standard error in $P/err (one thread: the host is busy, threads wait)
spec() {
	local m=$1
	shift
	run-spec --jsonl -K 1-8 -n 24 -t 1 "$@" "$m" <<<"$IDS" 2>"$P/err" |
	    sed -E 's/[0-9.]+ tok\/s ([0-9.]+x )?//'
}

# redraft JSON: D rewritten to $P/x.gguf with gguf-py, JSON's edits made: "kv" values
# (null: left out), "drop" tensors, "rows" (a tensor's first rows only), "add" (a tensor
# named after another one, a copy of it)
redraft() {
	python3 - "$D" "$P/x.gguf" "$1" <<'PY'
import json, sys
import gguf, numpy as np
src, dst, ed = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
r = gguf.GGUFReader(src)
w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
for f in r.fields.values():
    if f.name.startswith("GGUF.") or f.name == "general.architecture":
        continue
    v = ed.get("kv", {}).get(f.name, f.contents())
    if v is not None:
        sub = f.types[1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(f.name, v, f.types[0], sub_type=sub)
for t in r.tensors:
    if t.name not in ed.get("drop", []):
        a = np.asarray(t.data)
        n = ed.get("rows", {}).get(t.name)
        w.add_tensor(t.name, a[:n] if n else a, raw_dtype=t.tensor_type)
for name, like in ed.get("add", {}).items():
    w.add_tensor(name, np.asarray(next(t for t in r.tensors if t.name == like).data))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
PY
}

@test "quant-nvfp4 --no-mtp: the trunk alone as llama.cpp writes it; llama.cpp's draft: the blocks, byte for byte" {
	need_py gguf numpy
	run -0 gguf-inspect "$T"
	[[ $output == *"step35.block_count                        uint32          4"* ]]
	[[ $output == *"step35.attention.head_count               array[int32]    [4, 6, 6, 4]"* ]]
	[[ $output == *"step35.attention.sliding_window_pattern   array[bool]     [false, true, true, false]"* ]]
	[[ $output == *"step35.swiglu_clamp_shexp                 array[float32]  [0.4, 0, 0, 0.35]"* ]]
	[[ $output != *nextn* ]]
	run -0 gguf-inspect "$D"
	[[ $output == *"step35.block_count                        uint32          7"* ]]
	[[ $output == *"step35.nextn_predict_layers               uint32          3"* ]]
	[[ $output == *"step35.attention.head_count               array[int32]    [4, 6, 6, 4, 4, 6, 6]"* ]]
	# T's tensors are E's but the blocks, D's the blocks and the ends; every byte E's
	run -0 python3 - "$E" "$T" "$D" <<'PY'
import sys, gguf, numpy as np
e, t, d = ({x.name: np.asarray(x.data).tobytes() for x in gguf.GGUFReader(f).tensors}
           for f in sys.argv[1:])
blocks = {n for n in e if n.startswith(("blk.4.", "blk.5.", "blk.6."))}
assert set(t) == set(e) - blocks, set(t) ^ (set(e) - blocks)
assert set(d) == blocks | {"token_embd.weight", "output.weight", "output_norm.weight"}
assert all(t[n] == e[n] for n in t) and all(d[n] == e[n] for n in d)
print(len(t), len(blocks))
PY
	[ "$output" = "66 61" ]
	run -0 --separate-stderr run-gen --raw -n 16 -t 2 "$E" "hello world"
	want=$output
	run -0 --separate-stderr run-gen --raw -n 16 -t 2 "$T" "hello world"
	[ "$output" = "$want" ]
}

@test "the draft's blocks: each one's logits are the embedded blocks' bit for bit, on the trunk alone or not" {
	"$NX" -t 1 "$E" "$P/e" $NIDS
	"$NX" -t 1 "$T+$D" "$P/t" $NIDS
	"$NX" -t 1 "$E+$D" "$P/ed" $NIDS
	"$NX" -t 1 "$DATA/step35/step-n+$D" "$P/hd" $NIDS	# an HF checkpoint trunk
	cmp "$P/e" "$P/t"
	cmp "$P/e" "$P/ed"
	cmp "$P/e" "$P/hd"
	[ "$(stat -c %s "$P/e")" = $(((19 + 18 + 17) * 320 * 4)) ]
}

@test "run-spec with the draft: K=1..8 identical to plain greedy, every line the embedded chain's" {
	spec "$E" >"$P/want"
	[ "$(grep -c 'PASS (identical to plain)$' "$P/want")" = 8 ]
	for m in "$T+$D" "$E+$D"; do
		spec "$m" | diff "$P/want" -
		grep -qx "\[mtp-draft\] loading external MTP draft: $D" "$P/err"
		grep -qx '\[mtp-draft\] external NextN draft: blk.4-6 (3 blocks), full heads (320 rows)' "$P/err"
		grep -q '^run-spec: K=8: acceptance 0 with a trained head' "$P/err"
	done
	spec "$T" --draft "$D" | diff "$P/want" -
	MEMRA_MTP_DRAFT=$D spec "$T" | diff "$P/want" -
	# and over a pipeline split (the blocks on the last stage)
	spec "$T+$D" --pp-stages 2 --pp-devices cpu,cpu | diff "$P/want" -
	grep -q '^\[pp\] stage1: cpu .* + head + mtp, ' "$P/err"
}

@test "run-spec with the draft, sampled (temp 0.8): identical to the seeded rerun, drafts accepted as the embedded chain's" {
	spec "$E" --temp 0.8 --seed 11 >"$P/want"
	[ "$(grep -c 'PASS (identical to a seeded rerun)$' "$P/want")" = 8 ]
	grep -q '^K=1 acceptance [1-9][0-9]*/' "$P/want"
	spec "$T+$D" --temp 0.8 --seed 11 | diff "$P/want" -
	spec "$E+$D" --temp 0.8 --seed 11 | diff "$P/want" -
}

@test "trim-head on a step35 GGUF or llama.cpp's draft: each block's own head gathered in rank order under its name" {
	need_py gguf numpy
	printf '7\n300\n0\n42\n319\n5\n' >"$P/r.txt"
	trim-head "$E" "$P/r.txt" "$P/de.gguf"
	trim-head - "$P/r.txt" - <"$D" >"$P/ds.gguf"	# streams
	run -0 --separate-stderr trim-head -v "$D" "$P/r.txt" "$P/dd.gguf"
	[ "${stderr_lines[-1]}" = "trim-head: blk.4-6 + 6 of 320 rows of '$HEADS' (F32) -> $P/dd.gguf" ]
	for k in head_source:$HEADS mtp_block:4 head_vocab:6 vocab_size:320 trunk:e.gguf; do
		run -0 gguf-inspect -k "frspec.${k%%:*}" "$P/de.gguf"
		[ "$output" = "${k#*:}" ]
	done
	run -0 python3 - "$E" "$P/de.gguf" "$P/dd.gguf" "$P/ds.gguf" <<'PY'
import sys, gguf, numpy as np
ids = [7, 300, 0, 42, 319, 5]
e, de, dd, ds = ({x.name: np.asarray(x.data) for x in gguf.GGUFReader(f).tensors} for f in sys.argv[1:])
heads = {"blk.%d.nextn.shared_head_head.weight" % b for b in (4, 5, 6)}
blocks = {n for n in e if n.startswith(("blk.4.", "blk.5.", "blk.6."))}
assert set(de) == set(dd) == set(ds) == blocks | {"token_embd.weight", "output_norm.weight", "d2t"}
for n in de:
    assert de[n].tobytes() == dd[n].tobytes() == ds[n].tobytes(), n
    want = ids if n == "d2t" else e[n][ids] if n in heads else e[n]
    assert np.array_equal(de[n], np.asarray(want, dtype=de[n].dtype)), n
print("gathered", len(heads), "verbatim", len(de) - len(heads) - 1)
PY
	[ "$output" = "gathered 3 verbatim 60" ]
	run -0 "$NX" -t 1 "$T+$P/dd.gguf" "$P/l" $NIDS
	[ "$(stat -c %s "$P/l")" = $(((19 + 18 + 17) * 6 * 4)) ]
}

@test "a trimmed draft drafts as the self-trim of its ranks; all of the vocabulary, reversed, as the whole heads" {
	seq 319 -1 0 >"$P/all.txt"
	trim-head "$D" "$P/all.txt" "$P/all.gguf"
	# each block's logits: the whole head's reversed, bit for bit
	"$NX" -t 1 "$E" "$P/e" $NIDS
	"$NX" -t 1 "$T+$P/all.gguf" "$P/a" $NIDS
	MEMRA_FRSPEC_TRIM=$P/all.txt "$NX" -t 1 "$E" "$P/s" $NIDS
	MEMRA_FRSPEC_TRIM=$P/all.txt "$NX" -t 1 "$T+$D" "$P/sd" $NIDS
	cmp "$P/a" "$P/s"
	cmp "$P/a" "$P/sd"
	python3 -c 'import sys; from array import array
a, e = array("f"), array("f")
a.frombytes(open(sys.argv[1], "rb").read()); e.frombytes(open(sys.argv[2], "rb").read())
assert len(a) == len(e) == 54 * 320
assert all(a[r * 320:(r + 1) * 320] == e[r * 320:(r + 1) * 320][::-1] for r in range(54))' "$P/a" "$P/e"
	# sampled, every line the untrimmed chain's
	spec "$E" --temp 0.8 --seed 11 >"$P/want"
	spec "$T+$P/all.gguf" --temp 0.8 --seed 11 | diff "$P/want" -
	grep -qx '\[mtp-draft\] external NextN draft: blk.4-6 (3 blocks), heads trimmed to 320 rows (F32, d2t map)' "$P/err"
	MEMRA_FRSPEC_TRIM=$P/all.txt spec "$E" --temp 0.8 --seed 11 | diff "$P/want" -
	grep -qx "\[frspec-trim\] self-trimmed heads: 320 rows of the NextN blocks' own heads, blk.4-6 (F32)" "$P/err"
	MEMRA_FRSPEC_TRIM=$P/all.txt spec "$T+$D" --temp 0.8 --seed 11 | diff "$P/want" -
	grep -qx '\[mtp-draft\] external NextN draft: blk.4-6 (3 blocks), heads self-trimmed to 320 rows (F32, d2t map)' "$P/err"
	# 64 ids: trim-head's draft and both self-trims draft alike, greedy and sampled
	seq 0 5 315 >"$P/r64.txt"
	trim-head -n 64 "$E" "$P/r64.txt" "$P/d64.gguf"
	spec "$T+$P/d64.gguf" >"$P/g"
	[ "$(grep -c 'PASS (identical to plain)$' "$P/g")" = 8 ]
	MEMRA_FRSPEC_TRIM=$P/r64.txt spec "$E" | diff "$P/g" -
	MEMRA_FRSPEC_TRIM=$P/r64.txt spec "$T+$D" | diff "$P/g" -
	spec "$T+$P/d64.gguf" --temp 0.8 --seed 11 >"$P/s64"
	[ "$(grep -c 'PASS (identical to a seeded rerun)$' "$P/s64")" = 8 ]
	MEMRA_FRSPEC_TRIM=$P/r64.txt spec "$E" --temp 0.8 --seed 11 | diff "$P/s64" -
}

@test "a block without a head of its own drafts through the main head, trimmed as qwen35's is" {
	need_py gguf numpy
	seq 319 -1 0 >"$P/all.txt"
	redraft '{"drop": ["blk.5.nextn.shared_head_head.weight"]}'
	run -0 --separate-stderr trim-head -v "$P/x.gguf" "$P/all.txt" "$P/xt.gguf"
	[ "${stderr_lines[-1]}" = "trim-head: blk.4-6 + 320 of 320 rows of 'output.weight,blk.4.nextn.shared_head_head.weight,blk.6.nextn.shared_head_head.weight' (F32) -> $P/xt.gguf" ]
	run -0 gguf-inspect -t "$P/xt.gguf"
	printf '%s\n' "${lines[@]}" | grep -q $'^output.weight\tF32\t32,320\t'
	# block 5 drafts through the trunk's head (its bytes the draft's output.weight's);
	# trimmed, through the draft's output.weight, or at load the trunk's, rows reversed
	"$NX" -t 1 "$T+$P/x.gguf" "$P/u" $NIDS
	"$NX" -t 1 "$T+$P/xt.gguf" "$P/t" $NIDS
	MEMRA_FRSPEC_TRIM=$P/all.txt "$NX" -t 1 "$T+$P/x.gguf" "$P/s" $NIDS
	cmp "$P/t" "$P/s"
	python3 -c 'import sys; from array import array
a, e = array("f"), array("f")
a.frombytes(open(sys.argv[1], "rb").read()); e.frombytes(open(sys.argv[2], "rb").read())
assert len(a) == len(e) == 54 * 320
assert all(a[r * 320:(r + 1) * 320] == e[r * 320:(r + 1) * 320][::-1] for r in range(54))' "$P/t" "$P/u"
	! cmp -s "$P/u" <("$NX" -t 1 "$T+$D" - $NIDS) || false	# and block 5's head is not its own
}

@test "a draft that does not fit its trunk is an error naming what differs" {
	need_py gguf numpy
	fails() {	# fails WHY: run-spec on T+$P/x.gguf exits 1 saying WHY about the draft
		run -1 --separate-stderr run-spec --jsonl -K 1 -n 2 -t 1 "$T+$P/x.gguf" <<<"$IDS"
		[ "${stderr_lines[1]}" = "run-spec: $T: draft '$P/x.gguf': $1" ]
		[ "${#stderr_lines[@]}" = 2 ]
	}
	redraft '{}'
	cmp "$D" "$P/x.gguf"	# the rewrite alone changes nothing
	redraft '{"kv": {"step35.block_count": 8}}'
	fails 'its NextN blocks start at blk.5 (block_count 8 less nextn_predict_layers 3), the trunk has 4 layers'
	redraft '{"kv": {"step35.embedding_length": 64}}'
	fails 'step35.embedding_length 64, the trunk'"'"'s 32'
	redraft '{"rows": {"token_embd.weight": 300}}'
	fails 'token_embd.weight has 300 rows, the trunk'"'"'s vocabulary 320'
	redraft '{"kv": {"step35.expert_count": 4}}'
	fails 'step35.expert_count 4, the trunk'"'"'s 8'
	redraft '{"kv": {"step35.attention.layer_norm_rms_epsilon": 1e-6}}'
	fails 'step35.attention.layer_norm_rms_epsilon 1e-06, the trunk'"'"'s 1e-05'
	redraft '{"kv": {"step35.attention.head_count": [4, 4, 6, 4, 4, 6, 6]}}'
	fails 'layer 1: attention.head_count 4, the trunk'"'"'s 6'
	redraft '{"kv": {"step35.swiglu_clamp_exp": [0, 0, 0.35, 0.25, 0, 0, 0]}}'
	fails 'layer 3: swiglu_clamp_exp 0.25, the trunk'"'"'s 0.3'
	redraft '{"kv": {"step35.nextn_predict_layers": null}}'
	fails 'no NextN blocks (step35.nextn_predict_layers is absent or 0)'
	redraft '{"drop": ["blk.6.ffn_up_exps.weight"]}'
	fails "tensor 'blk.6.ffn_up_exps.weight' missing"
	redraft '{"add": {"blk.5.nextn.embed_tokens.weight": "token_embd.weight"}}'
	fails "tensor 'blk.5.nextn.embed_tokens.weight': a NextN block's own embedding is not supported"
	# another trunk (step-b: three layers), another architecture, no file
	run -1 --separate-stderr run-spec --jsonl -K 1 -n 2 -t 1 "$DATA/step35/step-b+$D" <<<"$IDS"
	[ "${stderr_lines[1]}" = "run-spec: $DATA/step35/step-b: draft '$D': its NextN blocks start at blk.4 (block_count 7 less nextn_predict_layers 3), the trunk has 3 layers" ]
	run -1 --separate-stderr run-spec --jsonl -K 1 -n 2 -t 1 "$T+$DATA/tiny.gguf" <<<"$IDS"
	[ "${stderr_lines[1]}" = "run-spec: $DATA/tiny.gguf: draft is not a 'step35' model (general.architecture)" ]
	run -1 --separate-stderr run-spec --jsonl -K 1 -n 2 -t 1 "$T+$P/none.gguf" <<<"$IDS"
	[ "${stderr_lines[1]}" = "run-spec: $P/none.gguf: No such file or directory" ]
}

@test "trimming twice is refused: a rank list with a trimmed draft, trim-head on a trimmed draft" {
	printf '1\n2\n3\n' >"$P/r.txt"
	trim-head "$E" "$P/r.txt" "$P/d.gguf"
	MEMRA_FRSPEC_TRIM=$P/r.txt run -1 --separate-stderr run-spec --jsonl -K 1 -n 2 -t 1 \
	    "$T+$P/d.gguf" <<<"$IDS"
	[ "${stderr_lines[1]}" = "run-spec: $T: frspec trim: the draft's heads are trimmed already (its d2t): give the rank list or the trimmed draft, not both" ]
	run -1 --separate-stderr trim-head "$P/d.gguf" "$P/r.txt" "$P/dd.gguf"
	[ "$stderr" = "trim-head: $P/d.gguf: a trimmed draft already (tensor 'd2t'): trim its trunk" ]
	[ ! -e "$P/dd.gguf" ]
	run -1 --separate-stderr trim-head "$T" "$P/r.txt" "$P/dd.gguf"
	[ "$stderr" = "trim-head: $T: no MTP block (step35.nextn_predict_layers is absent or 0)" ]
}

@test "run-gen attaches the draft: its line, and the plain decode's text" {
	run -0 --separate-stderr run-gen --raw -n 16 -t 2 "$E" "hello world"
	want=$output
	run -0 --separate-stderr run-gen --raw -n 16 -t 2 "$T+$D" "hello world"
	[ "$output" = "$want" ]
	[[ $stderr == *"[mtp-draft] external NextN draft: blk.4-6 (3 blocks), full heads (320 rows)"* ]]
	[[ $stderr == *MATCH* ]]
}

@test "serve with MEMRA_MODELS=name=trunk+draft: the proof lines, and every reply the plain server's" {
	need_py openai
	python3 - >"$P/q.jsonl" <<'PY'
import json
ps = ["hello world, the quick brown fox", "once upon a time there was", "the cat sat on the mat"]
for i in range(9):
    q = {"model": "s", "prompt": ps[i % 3][: 6 + 5 * i % 20], "max_tokens": 8 + 3 * i % 12,
         "temperature": 0, "delay": round(0.1 * i, 2)}
    if i % 3 == 2:
        q.update(temperature=0.8, seed=100 + i)
    print(json.dumps(q))
PY
	start_serve MEMRA_MODELS="s=$E" MEMRA_MAX_SESSIONS=1 MEMRA_SPEC_K=0
	run -0 python3 "$TOP/t/serve-client.py" "$URL" solo "$P/q.jsonl"
	want=$output
	[ "$(grep -c '"text"' <<<"$want")" = 9 ]
	stop_serve
	start_serve MEMRA_MODELS="s=$T+$D" MEMRA_MAX_SESSIONS=4 MEMRA_SPEC_K=3
	grep -qx "\[mtp-draft\] loading external MTP draft: $D" "$LOG"
	grep -qx '\[mtp-draft\] external NextN draft: blk.4-6 (3 blocks), full heads (320 rows)' "$LOG"
	grep -qx '\[model\] s: ctx=[0-9]* K=3 (MTP speculative decode for greedy requests)' "$LOG"
	run -0 python3 "$TOP/t/serve-client.py" "$URL" staggered "$P/q.jsonl"
	[ "$output" = "$want" ]
	[ "$(curl -s "$URL/metrics" | awk '$1 ~ /^memra_spec_rounds_total/ { s += $2 } END { print s + 0 }')" -gt 0 ]
}

@test "frspec-owngen --validate drafts through the NextN blocks, embedded or in the draft" {
	printf 'hello world\nthe cat sat on\nonce upon a time\n' >"$P/p.txt"
	printf '"a b c d"\n"the quick brown fox"\n' >"$P/held.jsonl"
	for m in "$E" "$T+$D"; do
		run -0 --separate-stderr frspec-owngen -t 2 --raw --ngen 8 --validate --validate-ngen 8 \
		    --validate-rounds 1 --heldout "$P/held.jsonl" "$m" "$P/r.gguf" 48 "$P/p.txt"
		[ "${lines[2]}" = "validate: K=3, 2 held-out prompts x 8 tokens, 1 ABBA round" ]
		[[ ${lines[3]} =~ ^trimmed\ \ \ acceptance\ [0-9]+/30\ = ]]
		[[ ${lines[4]} =~ ^untrimmed\ acceptance\ [0-9]+/30\ = ]]
		[[ ${lines[5]} =~ ^verdict\ (GOOD|WASH|BAD)\  ]]
	done
	run -2 --separate-stderr frspec-owngen -t 2 "$T+$D" "$P/r.gguf" 48 "$P/p.txt"
	[ "$stderr" = "frspec-owngen: $T+$D: a draft is for --validate (the ranks come from the model alone)" ]
}

@test "make-trimmed-draft on a step35 trunk: each block's head quantized as a head, the blocks as blocks" {
	seq 0 5 315 >"$P/r64.txt"
	run -0 --separate-stderr "$TOP/tools/make-trimmed-draft/make-trimmed-draft" -j 1 -r "$P/r64.txt" \
	    "$E" "$P/d.gguf"
	[ "${lines[0]}" = "MEMRA_MODELS=\"m=$E+$P/d.gguf\" serve" ]
	[[ $stderr == *"[mtp-draft] external NextN draft: blk.4-6 (3 blocks), heads trimmed to 64 rows (Q8_0, d2t map)"* ]]
	[[ $stderr == *"K=8 "*"PASS (identical to plain)"* ]]
	# 32-wide rows: NVFP4 (a head's) falls back to Q8_0, Q4_K (the blocks') to Q5_0
	run -0 gguf-inspect -t "$P/d.gguf"
	for b in 4 5 6; do
		printf '%s\n' "${lines[@]}" | grep -q "^blk.$b.nextn.shared_head_head.weight"$'\tQ8_0\t32,64\t'
		printf '%s\n' "${lines[@]}" | grep -q "^blk.$b.attn_output.weight"$'\tQ5_0\t'
	done
	printf '%s\n' "${lines[@]}" | grep -q $'^d2t\tI32\t64\t'
	! printf '%s\n' "${lines[@]}" | grep -q '^output.weight' || false
}
