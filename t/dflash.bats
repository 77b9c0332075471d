bats_require_minimum_version 1.5.0
# The DFlash2 block drafter (MEMRA_DSPARK_SPEC) on fixture model A with the tiny random
# drafter of t/data/dflash (tools/make-dflash-fixture.py, z-lab's reference): d2 (a sliding
# layer of window 16, a full-attention one) and w8 (d2's weights, both layers sliding at 8).
setup() { load helper; }

setup_file() {
	load helper
	export D2="$DATA/dflash/d2" GGUF="$BATS_FILE_TMPDIR/d2.gguf" W8="$BATS_FILE_TMPDIR/w8"
	quant-nvfp4 -t 1 --type BF16 "$D2" "$GGUF"
	mkdir "$W8"
	cp "$DATA/dflash/w8/config.json" "$W8/"
	ln -s "$(realpath "$D2/model.safetensors")" "$W8/model.safetensors"
}

# run-spec armed with the fixture drafter: $@ its arguments before model and prompt
armed() {
	MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT=${MEMRA_DSPARK_DRAFT:-$D2} run-spec --raw -t 2 "$@"
}

@test "the drafter's forward equals z-lab's reference within 1e-4, from HF and from our GGUF" {
	model_a >/dev/null
	run -0 env DFLASH_GGUF="$GGUF" "$TOP/build/t/unit/dflash"
	[[ $output == *"ok drafter_forward_equals_the_reference_within_1e_4"* ]]
	[[ $output == *"ok w8_drafter_forward_equals_the_reference_within_1e_4"* ]]
	[[ $output == *"ok drafter_from_our_gguf_conversion_is_the_same_drafter"* ]]
	[[ $output == *"ok the_ring_drafts_what_every_position_kept_drafts_bit_for_bit"* ]]
	[[ $output == *"ok the_device_path_drafts_what_the_host_path_does_bit_for_bit"* ]]
	[[ ${lines[-1]} == "9 passed, 0 failed" ]]
}

@test "our GGUF of the drafter has llama.cpp's tensor names, shapes and dflash metadata" {
	run -0 gguf-inspect "$GGUF"
	# tensors: name and shape, as llama.cpp's converter wrote them (its types are its --outtype's)
	want=$(awk '!/ = / { gsub(",", "x", $3); print $1, $3 }' "$DATA/dflash/llamacpp-header.txt" | sort)
	have=$(printf '%s\n' "${lines[@]}" | awk '/^  [a-z]/ && NF == 5 && $1 != "name" { print $1, $3 }' | sort)
	[ "$have" = "$want" ]
	# metadata, the floats left out (printed another way); target_layers are the HF ids + 1
	kvs=$(printf '%s\n' "${lines[@]}" | awk '/^  [a-z]/ && $1 ~ /\./ { k = $1; $1 = $2 = ""; sub(/^ +/, ""); print k " = " $0 }')
	grep ' = ' "$DATA/dflash/llamacpp-header.txt" | grep -Ev 'freq_base|epsilon' >"$BATS_TEST_TMPDIR/want"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/want")" -eq 19 ]
	while IFS= read -r kv; do
		printf '%s\n' "$kvs" | grep -Fxq "$kv"
	done <"$BATS_TEST_TMPDIR/want"
	printf '%s\n' "${lines[@]}" | grep -Eq '^  dflash.target_layers +array\[int32\] +\[3, 6\]$'
}

@test "greedy DFlash2 speculation on model A is identical to plain decode, K=1..7" {
	d=$(model_a)
	run -0 --separate-stderr armed -K 1-7 -n 24 "$d" "def fibonacci(n):"
	[[ ${lines[0]} =~ ^plain\ [0-9.]+\ tok/s\ \(24\ tokens,\ 1\ prompt\)$ ]]
	for k in 1 2 3 4 5 6 7; do
		[[ ${lines[$k]} == "K=$k "*" acceptance "*" PASS (identical to plain)" ]]
	done
	[ "${lines[8]}" = "SELF-CONSISTENCY PASS" ]
}

# A sliding layer's context cache is a ring of window - 1 + block rows (t/unit/dflash: the
# drafts are those of a cache of every position, bit for bit): a prompt and a reply of 12
# windows of 8, drafts accepted here and there by a head trimmed to A's continuation.
@test "greedy speculation over many windows, sliding layers in rings, is identical to plain decode" {
	d=$(model_a)
	printf '286\n11\n15\n72\n6043\n604\n519\n43\n' >"$BATS_TEST_TMPDIR/r8.txt"
	export MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/r8.txt
	MEMRA_DSPARK_DRAFT=$W8 run -0 --separate-stderr armed -K 1-7 -n 96 "$d" "def fibonacci(n):"
	[ "${stderr_lines[1]}" = "[dspark] A: DFlash2 drafter $W8: 2 layers, block 8, taps [2,5], window 8, weights Q4_0" ]
	[[ ${lines[0]} == "plain "*"(96 tokens, 1 prompt)" ]]
	for k in 1 2 3 4 5 6 7; do
		[[ ${lines[$k]} =~ ^K=$k\ .*acceptance\ [1-9][0-9]*/.*PASS\ \(identical\ to\ plain\)$ ]]
	done
	run -0 --separate-stderr armed -K 7 -n 96 "$d" "def fibonacci(n):"
	[[ ${lines[1]} =~ ^K=7\ .*acceptance\ [1-9][0-9]*/.*PASS\ \(identical\ to\ plain\)$ ]]
}

@test "without -K the round verifies the whole block: K = block - 1" {
	d=$(model_a)
	run -0 --separate-stderr armed -n 8 "$d" "def fibonacci(n):"
	[[ ${lines[1]} == "K=7 "*"PASS (identical to plain)" ]]
	[ "${#lines[@]}" -eq 3 ]
	run -2 --separate-stderr armed -K 8 -n 8 "$d" hi
	[[ $stderr == *"run-spec: -K 8: the DFlash drafter drafts at most 7 tokens a round (its block of 8)" ]]
}

@test "a head trimmed to A's own continuation gets drafts accepted, the output still plain's, and says TRIMMED" {
	d=$(model_a)
	printf '286\n11\n15\n72\n6043\n604\n519\n43\n' >"$BATS_TEST_TMPDIR/r8.txt"
	MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/r8.txt run -0 --separate-stderr armed -n 48 "$d" "def fibonacci(n):"
	[[ ${lines[1]} =~ ^K=7\ .*acceptance\ [1-9][0-9]*/[0-9]+.*PASS\ \(identical\ to\ plain\)$ ]]
	[[ $'\n'"$stderr"$'\n' == *$'\n'"[dspark] A: DFlash2 draft head TRIMMED to 8 rows"$'\n'* ]]
	# a trim shorter than the selector's top k cannot draft
	printf '286\n11\n' >"$BATS_TEST_TMPDIR/r2.txt"
	MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/r2.txt run -1 --separate-stderr armed -n 8 "$d" hi
	[[ $stderr == *"its selector takes the top 8 of the head, trimmed to 2 rows" ]]
}

@test "sampled DFlash2 speculation (temp 0.8) is identical to its seeded rerun" {
	d=$(model_a)
	printf '286\n11\n15\n72\n6043\n604\n519\n43\n' >"$BATS_TEST_TMPDIR/r8.txt"
	run -0 --separate-stderr armed -K 3-7 --temp 0.8 --seed 11 -n 24 "$d" "Once upon a time"
	for k in 1 2 3 4 5; do
		[[ ${lines[$k]} == "K=$((k + 2)) "*"PASS (identical to a seeded rerun)" ]]
	done
	MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/r8.txt run -0 --separate-stderr armed --temp 0.3 \
	    --seed 3 -n 48 "$d" "def fibonacci(n):"
	[[ ${lines[1]} =~ ^K=7\ .*acceptance\ [1-9][0-9]*/.*PASS\ \(identical\ to\ a\ seeded\ rerun\)$ ]]
}

@test "boot proof: arming disables MTP spec, the drafter's path, shape and resolved precision" {
	d=$(model_a)
	run -0 --separate-stderr armed -n 4 "$d" hi
	[ "${stderr_lines[0]}" = "[dspark] arming DFlash2 disables MTP spec (the trunk's MTP head stays unused)" ]
	[ "${stderr_lines[1]}" = "[dspark] A: DFlash2 drafter $D2: 2 layers, block 8, taps [2,5], window 16, weights Q4_0" ]
	[ "${stderr_lines[2]}" = "[dspark] A: precision q4 (MEMRA_DFLASH_PREC)" ]
	for p in q8:Q8_0 bf16:BF16 f32:F32; do
		MEMRA_DFLASH_PREC=${p%:*} run -0 --separate-stderr armed -n 4 "$d" hi
		[[ ${stderr_lines[1]} == *", weights ${p#*:}" ]]
		[ "${stderr_lines[2]}" = "[dspark] A: precision ${p%:*} (MEMRA_DFLASH_PREC)" ]
	done
	# our GGUF loads the same way; its taps print as HF ids
	MEMRA_DSPARK_DRAFT=$GGUF MEMRA_DSPARK_SPEC=1 run -0 --separate-stderr run-spec --raw -t 2 -n 4 "$d" hi
	[ "${stderr_lines[1]}" = "[dspark] A: DFlash2 drafter $GGUF: 2 layers, block 8, taps [2,5], window 16, weights Q4_0" ]
}

@test "the flags are the variables, and a flag wins over its variable" {
	d=$(model_a)
	run -0 --separate-stderr armed -n 16 "$d" hi
	want=$(printf '%s\n' "${lines[@]}" | sed 's/[0-9.]* tok\/s//g; s/[0-9.]*x acc/acc/')
	run -0 --separate-stderr run-spec --raw -t 2 -n 16 --dspark-spec 1 --dspark-draft "$D2" "$d" hi
	[ "$(printf '%s\n' "${lines[@]}" | sed 's/[0-9.]* tok\/s//g; s/[0-9.]*x acc/acc/')" = "$want" ]
	[[ ${stderr_lines[0]} == "[dspark] arming DFlash2 disables MTP spec"* ]]
	MEMRA_DFLASH_PREC=q8 run -0 --separate-stderr armed --dflash-prec bf16 -n 4 "$d" hi
	[[ ${stderr_lines[1]} == *", weights BF16" ]]
	# --dspark-spec 0 over MEMRA_DSPARK_SPEC=1: the MTP head drafts, K=1..8
	run -0 --separate-stderr armed --dspark-spec 0 -n 8 "$d" hi
	[ "${stderr_lines[0]}" = "[dspark] drafter $D2 not armed (MEMRA_DSPARK_SPEC is not 1): MTP spec as before" ]
	[[ ${lines[8]} == "K=8 "*"PASS (identical to plain)" ]]
}

@test "bad settings are usage errors that name the variable" {
	d=$(model_a)
	MEMRA_DSPARK_SPEC=1 run -2 --separate-stderr run-spec -n 4 "$d" hi
	[[ $stderr == "run-spec: MEMRA_DSPARK_SPEC=1: no drafter (MEMRA_DSPARK_DRAFT, --dspark-draft)"* ]]
	MEMRA_DSPARK_SPEC=yes run -2 --separate-stderr run-spec -n 4 "$d" hi
	[[ $stderr == "run-spec: MEMRA_DSPARK_SPEC (--dspark-spec) 'yes': not 0 or 1"* ]]
	MEMRA_DFLASH_PREC=q5 run -2 --separate-stderr armed -n 4 "$d" hi
	[[ $stderr == "run-spec: MEMRA_DFLASH_PREC (--dflash-prec) 'q5': not q4, q8, bf16, f32 or keep"* ]]
}

@test "a drafter that is missing or does not fit its trunk is an error, never a fallback" {
	d=$(model_a)
	MEMRA_DSPARK_DRAFT=$BATS_TEST_TMPDIR/nope run -1 --separate-stderr armed -n 4 "$d" hi
	[[ $stderr == "run-spec: $d: DFlash drafter $BATS_TEST_TMPDIR/nope: "* ]]
	MEMRA_DSPARK_DRAFT=$d run -1 --separate-stderr armed -n 4 "$d" hi
	[[ $stderr == *"DFlash drafter '$d': not a DFlash drafter (architecture 'qwen35')" ]]
	run -1 --separate-stderr armed -n 4 "$DATA/tiny/q35-r2" hi
	[[ $stderr == *"drafts for a trunk of hidden size 384 and 8192 tokens (mask token 8189), not this one's "* ]]
	MEMRA_MTP_DRAFT=$GGUF run -1 --separate-stderr armed -n 4 "$d" hi
	[[ $stderr == *"a DFlash drafter and an MTP draft ($GGUF): two spec programs never coexist" ]]
}

@test "a DSpark drafter is refused by name" {
	d=$(model_a)
	cp -r "$D2" "$BATS_TEST_TMPDIR/ds"
	sed -i 's/"DFlash2DraftModel"/"DSparkDraftModel"/' "$BATS_TEST_TMPDIR/ds/config.json"
	MEMRA_DSPARK_DRAFT=$BATS_TEST_TMPDIR/ds run -1 --separate-stderr armed -n 4 "$d" hi
	[[ $stderr == *"a DSpark drafter (a Markov head over the block): not supported (DFlash and DFlash2 drafters are)" ]]
}

@test "serve refuses a MEMRA_DSPARK_* it does not take (t/serve-draft.bats serves the drafter)" {
	MEMRA_DSPARK_SAMPLED=1 run -2 --separate-stderr serve
	[[ $stderr == *"MEMRA_DSPARK_SAMPLED: not supported by this server"* ]]
}

# The drafter's forward on the CUDA backend (backend_dconv, the selector over rows read
# back): greedy speculation on the GPU is the GPU's plain decode, d2 and w8's rings alike.
# bats test_tags=gpu
@test "on a GPU greedy DFlash2 speculation is identical to plain decode, K=1..7, rings too" {
	d=$(model_a)
	run -0 --separate-stderr armed --device cuda -K 1-7 -n 24 "$d" "def fibonacci(n):"
	[[ ${lines[0]} == "plain "*"(24 tokens, 1 prompt)" ]]
	for k in 1 2 3 4 5 6 7; do
		[[ ${lines[$k]} == "K=$k "*" acceptance "*" PASS (identical to plain)" ]]
	done
	[ "${lines[8]}" = "SELF-CONSISTENCY PASS" ]
	printf '286\n11\n15\n72\n6043\n604\n519\n43\n' >"$BATS_TEST_TMPDIR/r8.txt"
	MEMRA_FRSPEC_TRIM=$BATS_TEST_TMPDIR/r8.txt MEMRA_DSPARK_DRAFT=$W8 run -0 --separate-stderr \
	    armed --device cuda -K 1-7 -n 96 "$d" "def fibonacci(n):"
	[[ ${lines[0]} == "plain "*"(96 tokens, 1 prompt)" ]]
	for k in 1 2 3 4 5 6 7; do
		[[ ${lines[$k]} =~ ^K=$k\ .*acceptance\ [1-9][0-9]*/.*PASS\ \(identical\ to\ plain\)$ ]]
	done
}

# A DFlash (no conv, no selector) drafter: the fixture's backbone alone, its config renamed.
@test "a DFlash drafter (no selector) drafts from its logits, and greedy output is plain's" {
	d=$(model_a)
	need_py json struct
	mkdir "$BATS_TEST_TMPDIR/d1"
	python3 - "$D2" "$BATS_TEST_TMPDIR/d1" <<'PY'
import json, struct, sys
src, dst = sys.argv[1], sys.argv[2]
c = json.load(open(src + "/config.json"))
c["architectures"] = ["DFlashDraftModel"]
for k in ("conv_group_size", "conv_kernel_size", "selector_rank", "selector_top_k"):
    del c["dflash_config"][k]
json.dump(c, open(dst + "/config.json", "w"))
b = open(src + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
keep, out, off = {}, [], 0
for k, v in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0] if kv[0] != "__metadata__" else -1):
    if k == "__metadata__" or "conv" in k or "selector" in k:
        continue
    s, e = v["data_offsets"]
    out.append(b[8 + n + s:8 + n + e])
    keep[k] = dict(v, data_offsets=[off, off + e - s])
    off += e - s
hb = json.dumps(keep).encode()
open(dst + "/model.safetensors", "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(out))
PY
	MEMRA_DSPARK_DRAFT=$BATS_TEST_TMPDIR/d1 run -0 --separate-stderr armed -K 3-7 -n 24 "$d" "def fibonacci(n):"
	[ "${stderr_lines[1]}" = "[dspark] A: DFlash drafter $BATS_TEST_TMPDIR/d1: 2 layers, block 8, taps [2,5], window 16, weights Q4_0" ]
	for k in 1 2 3 4 5; do
		[[ ${lines[$k]} == "K=$((k + 2)) "*"PASS (identical to plain)" ]]
	done
	MEMRA_DSPARK_DRAFT=$BATS_TEST_TMPDIR/d1 run -0 --separate-stderr armed --temp 0.8 --seed 5 -n 24 "$d" "Once upon a time"
	[[ ${lines[1]} == "K=7 "*"PASS (identical to a seeded rerun)" ]]
}
