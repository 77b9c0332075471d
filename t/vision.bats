bats_require_minimum_version 1.5.0
# Images in (issue 32): PNG and JPEG decoding, Gemma-4's preprocessing, the vision tower
# and its projector on the CPU, the image's soft tokens in a gemma4 prompt.  The fixture
# t/data/gemma4/g4-vision (tools/make-gemma4-vision.py) holds transformers 5.17's answers:
# its image processor's resized pixels (pixels.json, images/*.hf.png) and the logits of a
# two-image prompt (refs.json); mmproj-f32.gguf is llama.cpp's converter's mmproj of it.
setup() {
	load helper
	V=$DATA/gemma4/g4-vision
	IP=$TOP/build/t/tools/image-prep
	[ -x "$IP" ] || skip "build/t/tools not built (make units)"
}

# want NAME: transformers' line for image NAME of pixels.json, as image-prep prints it
want() {
	python3 -c 'import json,sys
n=sys.argv[2]; i=json.load(open(sys.argv[1]))["images"][n]
print("%s %dx%d -> %dx%d grid %dx%d tokens %d sha256 %s" % (n, *i["size"], *i["resized"],
      *i["grid"], i["tokens"], i["sha256"]))' "$V/pixels.json" "$1"
}

@test "decode + resize of every test image equals transformers' image processor byte for byte" {
	for f in a.png b.jpg gray.png pal.png rgba.png prog.jpg grayj.jpg wide.png exact.png; do
		run -0 "$IP" -p 4 -m 70 "$V/images/$f"
		[ "$output" = "$(want "$f")" ]
	done
}

@test "the size policy fills the token budget: a small image is upscaled, a large one shrunk" {
	run -0 "$IP" -p 4 -m 70 "$V/images/a.png" "$V/images/b.jpg"
	[[ ${lines[0]} == "a.png 61x47 -> 108x84 grid 27x21 tokens 63 "* ]]
	[[ ${lines[1]} == "b.jpg 200x90 -> 144x60 grid 36x15 tokens 60 "* ]]
	run -0 "$IP" "$V/images/b.jpg"		# Gemma-4's own patch 16, 280 tokens
	[[ $output == "b.jpg 200x90 -> 1152x528 grid 72x33 tokens 264 "* ]]
}

@test "damaged, truncated and foreign files fail with a reason" {
	head -c 3000 "$V/images/a.png" >"$BATS_TEST_TMPDIR/cut.png"
	head -c 2000 "$V/images/b.jpg" >"$BATS_TEST_TMPDIR/cut.jpg"
	printf 'GIF89a....' >"$BATS_TEST_TMPDIR/x.gif"
	run -1 "$IP" "$BATS_TEST_TMPDIR/cut.png" "$BATS_TEST_TMPDIR/cut.jpg" "$BATS_TEST_TMPDIR/x.gif"
	[ "${lines[0]}" = "cut.png error: PNG: truncated file" ]
	[ "${lines[1]}" = "cut.jpg error: JPEG: truncated file" ]
	[ "${lines[2]}" = "x.gif error: not a PNG or JPEG image" ]
}

@test "a JPEG is turned upright by its EXIF orientation, as transformers' load_image (PIL) turns it" {
	# t/data/exif (tools/make-exif-fixtures.py): a 7x5 JPEG in each of the 8 orientations
	# and with odd EXIF and XMP blocks, and what PIL's ImageOps.exif_transpose makes of each
	E=$DATA/exif
	python3 -c 'import json,sys
for n, v in sorted(json.load(open(sys.argv[1]))["images"].items()):
    print("%s.jpg %dx%d sha256 %s" % (n, v["size"][0], v["size"][1], v["sha256"]))' \
	    "$E/expect.json" >"$BATS_TEST_TMPDIR/want"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/want")" = 28 ]
	(cd "$E" && "$IP" -d $(sed 's/ .*//' "$BATS_TEST_TMPDIR/want")) >"$BATS_TEST_TMPDIR/got"
	diff "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got"
	# the eight tell apart: 5..8 swap the sides, and no two give the same pixels
	for o in 5 6 7 8; do grep -q "^o$o.jpg 5x7 " "$BATS_TEST_TMPDIR/got"; done
	[ "$(grep '^o[1-8]\.jpg' "$BATS_TEST_TMPDIR/got" | awk '{ print $4 }' | sort -u | wc -l)" = 8 ]
	# the turned image is the one Gemma-4's preprocessing sizes
	run -0 "$IP" -p 4 -m 70 "$E/o6.jpg" "$E/o1.jpg"
	[[ ${lines[0]} == "o6.jpg 5x7 -> "* ]] && [[ ${lines[1]} == "o1.jpg 7x5 -> "* ]]
}

@test "an image past the size limits is refused from its header" {
	# a PNG header claiming 20000x20000 (IHDR with its CRC), no pixel data
	python3 -c 'import struct,sys,zlib
ihdr=struct.pack(">IIBBBBB",20000,20000,8,2,0,0,0)
c=b"IHDR"+ihdr
sys.stdout.buffer.write(b"\x89PNG\r\n\x1a\n"+struct.pack(">I",13)+c+struct.pack(">I",zlib.crc32(c)))' >"$BATS_TEST_TMPDIR/big.png"
	run -1 "$IP" "$BATS_TEST_TMPDIR/big.png"
	[ "$output" = "big.png error: image of 20000x20000: larger than 16384x16384 or 67108864 pixels" ]
}

# refs_ids: the reference prompt's ids (images expanded), space-separated
refs_ids() {
	python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["input_ids"])))' "$V/refs.json"
}

# close_to_refs FILE: every position's logits within 1e-4 (relative to the row's largest)
# of transformers', and the last row's argmax its first greedy token
close_to_refs() {
	python3 -c 'import json,sys,numpy as np
r=json.load(open(sys.argv[1])); ref=np.array(r["logits"],dtype=np.float32)
ours=np.fromfile(sys.argv[2],dtype=np.float32).reshape(ref.shape)
rel=np.abs(ours-ref).max(axis=1)/np.abs(ref).max(axis=1)
print("worst relative error %.2e at %d" % (rel.max(), rel.argmax()))
sys.exit(0 if rel.max() <= 1e-4 and ours[-1].argmax() == r["greedy"][0] else 1)' "$V/refs.json" "$1"
}

@test "HF tower: logits of a two-image prompt within 1e-4 of transformers' (its own pixels)" {
	need_py numpy
	VL=$TOP/build/t/tools/vision-logits
	"$VL" -t 2 -m 70 -i "$V/images/a.hf.png" -i "$V/images/b.hf.png" "$V" "$V" \
	    "$BATS_TEST_TMPDIR/l" $(refs_ids)
	run -0 close_to_refs "$BATS_TEST_TMPDIR/l"
}

@test "llama.cpp's mmproj GGUF (gemma4v): the same logits, bit for bit, as the HF tower" {
	VL=$TOP/build/t/tools/vision-logits
	"$VL" -t 2 -m 70 -i "$V/images/a.hf.png" -i "$V/images/b.hf.png" "$V" "$V" \
	    "$BATS_TEST_TMPDIR/hf" $(refs_ids)
	"$VL" -t 2 -m 70 -i "$V/images/a.hf.png" -i "$V/images/b.hf.png" "$V" \
	    "$V/mmproj-f32.gguf" "$BATS_TEST_TMPDIR/gguf" $(refs_ids)
	cmp "$BATS_TEST_TMPDIR/hf" "$BATS_TEST_TMPDIR/gguf"
}

@test "our decoding and preprocessing of the original files give transformers' pixels: the same logits" {
	VL=$TOP/build/t/tools/vision-logits
	"$VL" -t 2 -m 70 -i "$V/images/a.hf.png" -i "$V/images/b.hf.png" "$V" "$V" \
	    "$BATS_TEST_TMPDIR/hf" $(refs_ids)
	"$VL" -t 2 -m 70 -i "$V/images/a.png" -i "$V/images/b.jpg" "$V" "$V" \
	    "$BATS_TEST_TMPDIR/ours" $(refs_ids)
	cmp "$BATS_TEST_TMPDIR/hf" "$BATS_TEST_TMPDIR/ours"
}

@test "text rows one at a time and each image in one forward give the prefill's logits bit for bit" {
	VL=$TOP/build/t/tools/vision-logits
	"$VL" -t 2 -m 70 -i "$V/images/a.png" -i "$V/images/b.jpg" "$V" "$V" "$BATS_TEST_TMPDIR/p" $(refs_ids)
	"$VL" -t 2 -s -m 70 -i "$V/images/a.png" -i "$V/images/b.jpg" "$V" "$V" "$BATS_TEST_TMPDIR/s" $(refs_ids)
	cmp "$BATS_TEST_TMPDIR/p" "$BATS_TEST_TMPDIR/s"
}

@test "an image whose soft-token count differs from the prompt's is refused" {
	VL=$TOP/build/t/tools/vision-logits
	run -1 "$VL" -t 2 -m 70 -i "$V/images/b.jpg" -i "$V/images/a.png" "$V" "$V" - $(refs_ids)
	[[ $output == *"a soft-token count differs"* ]]
	run -1 "$VL" -t 2 -m 70 -i "$V/images/a.png" "$V" "$V" - $(refs_ids)
	[[ $output == *"the prompt has 2 image markers for 1 images"* ]]
}

@test "an mmproj of another projector and a checkpoint without a tower are refused by name" {
	VL=$TOP/build/t/tools/vision-logits
	run -1 "$VL" -t 2 -i "$V/images/a.png" "$V" "$DATA/gemma4/g4-dense" - 284 285 286
	[[ $output == *"g4-dense: config.json has no vision_config"* ]]
	run -1 "$VL" -t 2 -i "$V/images/a.png" "$V" "$DATA/gemma4/g4-dense/llamacpp-f32.gguf" - 284 285 286
	[[ $output == *"not an mmproj GGUF"* ]]
}

# greedy: transformers' 16-token greedy continuation of the reference prompt
greedy() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["greedy"])' "$V/refs.json"
}

# The reference prompt with one <|image|> marker for each image, as a --jsonl request.
REQ='{"prompt": [280, 5, 17, 250, 285, 3, 99, 42, 285, 7, 1, 64], "n": 16}'

@test "run-gen --image: transformers' greedy ids, the gate MATCH, the tower and images proved" {
	run -0 --separate-stderr run-gen -t 2 --jsonl --image "$V/images/a.png" --image "$V/images/b.jpg" "$V" <<<"$REQ"
	[[ $output == *"\"ids\": $(greedy), \"prompt_tokens\": 137, \"gate\": \"MATCH\""* ]]
	[[ $stderr == *"[vision] gemma4 tower: 2 layers, hidden 32, patch 4, pool 3, 70 soft tokens an image at most, image rows bidirectional ($V)"* ]]
	[[ $stderr == *"[vision] $V/images/a.png: 61x47 -> 108x84, 63 soft tokens"* ]]
	[[ $stderr == *"[vision] $V/images/b.jpg: 200x90 -> 144x60, 60 soft tokens"* ]]
}

@test "run-gen --mmproj (llama.cpp's GGUF) with --image-tokens 70: the same ids; MEMRA_GEMMA_MMPROJ too" {
	run -0 --separate-stderr run-gen -t 2 --jsonl --image "$V/images/a.png" --image "$V/images/b.jpg" \
	    --mmproj "$V/mmproj-f32.gguf" --image-tokens 70 "$V" <<<"$REQ"
	[[ $output == *"\"ids\": $(greedy), "* ]]
	MEMRA_GEMMA_MMPROJ=$V/mmproj-f32.gguf run -0 --separate-stderr run-gen -t 2 --jsonl \
	    --image "$V/images/a.png" --image "$V/images/b.jpg" --image-tokens 70 "$V" <<<"$REQ"
	[[ $output == *"\"ids\": $(greedy), "* ]]
	[[ $stderr == *"($V/mmproj-f32.gguf)"* ]]
}

@test "run-gen --image with a chat prompt: the images before the text, the gate MATCH" {
	run -0 --separate-stderr run-gen -t 2 -n 4 --ids --image "$V/images/a.png" "$V" "What is this?"
	[[ $stderr == *"MATCH"* ]]
	[ "${#lines[@]}" = 1 ]
	# the template's user turn: <|image|> before the text, 63 soft tokens in its place
	run -0 --separate-stderr run-gen -t 2 -n 4 --ids --raw --image "$V/images/a.png" "$V" \
	    "<|turn>user


<|image|>

What is this?<turn|>
<|turn>model
"
	[ "$output" = "$(run-gen -t 2 -n 4 --ids --image "$V/images/a.png" "$V" "What is this?" 2>/dev/null)" ]
}

@test "run-gen --image errors: markers that do not match, a bad file, a bad budget, no image" {
	run -1 --separate-stderr run-gen -t 2 --raw --image "$V/images/a.png" "$V" "no marker"
	[ "${stderr##*$'\n'}" = "run-gen: the prompt has 0 image markers for 1 images" ]
	run -1 --separate-stderr run-gen -t 2 --image "$V/pixels.json" "$V" "hi"
	[ "${stderr##*$'\n'}" = "run-gen: $V/pixels.json: not a PNG or JPEG image" ]
	run -2 --separate-stderr run-gen -t 2 --image "$V/images/a.png" --image-tokens 100 "$V" "hi"
	[[ $stderr == "run-gen: --image-tokens 100: not 70, 140, 280, 560 or 1120"* ]]
	run -2 --separate-stderr run-gen -t 2 --mmproj "$V/mmproj-f32.gguf" "$V" "hi"
	[[ $stderr == "run-gen: --image goes with prompts"* ]]
	run -1 --separate-stderr run-gen -t 2 --image "$V/images/a.png" "$DATA/gemma4/g4-dense" "hi"
	[[ $stderr == "run-gen: $DATA/gemma4/g4-dense: config.json has no vision_config" ]]
}

# bats test_tags=gpu
@test "run-gen --image on cuda: the tower on the model's backend, the CPU's ids, the gate MATCH" {
	run -0 --separate-stderr run-gen -t 2 --device cpu --jsonl --image "$V/images/a.png" \
	    --image "$V/images/b.jpg" "$V" <<<"$REQ"
	cpu=$output
	run -0 --separate-stderr run-gen --device cuda --jsonl --image "$V/images/a.png" \
	    --image "$V/images/b.jpg" "$V" <<<"$REQ"
	[[ $output == *"\"ids\": $(greedy), \"prompt_tokens\": 137, \"gate\": \"MATCH\""* ]]
	[ "$(jq -c .ids <<<"$output")" = "$(jq -c .ids <<<"$cpu")" ]
	# a chat prompt, an mmproj GGUF's tower, a budget of 70 tokens
	for a in "" "--mmproj $V/mmproj-f32.gguf --image-tokens 70"; do
		# shellcheck disable=SC2086
		want=$(run-gen -t 2 --device cpu -n 8 --ids $a --image "$V/images/wide.png" "$V" \
		    "What is this?" 2>/dev/null)
		# shellcheck disable=SC2086
		run -0 --separate-stderr run-gen --device cuda -n 8 --ids $a \
		    --image "$V/images/wide.png" "$V" "What is this?"
		[ "$output" = "$want" ]
		[[ $stderr == *"MATCH"* ]]
	done
}
