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
	[[ ${lines[0]} == "o6.jpg 5x7 -> "* ]]
	[[ ${lines[1]} == "o1.jpg 7x5 -> "* ]]
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

# The fixture's tower in BF16 and F16 (mmproj-bf16.gguf, mmproj-f16.gguf: mmproj-f32.gguf through
# quant-nvfp4, tools/make-gemma4-vision-half.sh).  Their products follow llama.cpp's rule
# (lib/vision.h): activations rounded to the weight's type, fp32 sums.  Against the same
# weights held as F32 (quant-nvfp4 --type F32 of them: the same values, fp32 products) the soft
# tokens move by that rounding (BF16 8.7e-3, F16 1.4e-3 of 1 + |x| at most on these images:
# far past float order, 1e-7, and inside 2e-2 / 5e-3).  No transformers reference holds a half
# tower: rounding the weights alone moves this tiny random model's logits by 0.48 of the row's
# largest (BF16), the activations' rounding by 0.57 more, so only the F32 tower is held to 1e-4.
@test "BF16 and F16 towers: activations rounded at each product (soft tokens off the same weights in F32 by that rounding), the same bits on 1 and 2 threads" {
	need_py numpy
	VL=$TOP/build/t/tools/vision-logits
	P=$BATS_TEST_TMPDIR
	for t in bf16:2e-2 f16:5e-3; do
		f=$V/mmproj-${t%%:*}.gguf
		quant-nvfp4 --type F32 "$f" "$P/f32.gguf"
		"$VL" -e -t 2 -m 70 -i "$V/images/a.hf.png" -i "$V/images/b.hf.png" "$V" "$f" "$P/h" $(refs_ids)
		"$VL" -e -t 2 -m 70 -i "$V/images/a.hf.png" -i "$V/images/b.hf.png" "$V" "$P/f32.gguf" \
		    "$P/s" $(refs_ids)
		run -0 python3 -c 'import numpy as np,sys
h=np.fromfile(sys.argv[1],dtype=np.float32); s=np.fromfile(sys.argv[2],dtype=np.float32)
d=(np.abs(h-s)/(1+np.abs(s))).max(); print("soft tokens %d, max difference %.2e" % (h.size, d))
sys.exit(0 if h.size == 123*32 and np.isfinite(h).all() and 1e-4 < d <= float(sys.argv[3]) else 1)' \
		    "$P/h" "$P/s" "${t#*:}"
		"$VL" -t 1 -m 70 -i "$V/images/a.hf.png" -i "$V/images/b.hf.png" "$V" "$f" "$P/l1" $(refs_ids)
		"$VL" -t 2 -m 70 -i "$V/images/a.hf.png" -i "$V/images/b.hf.png" "$V" "$f" "$P/l2" $(refs_ids)
		cmp "$P/l1" "$P/l2"
	done
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

# hf_fit W H PATCH BUDGET: transformers' Gemma-4 image processor's resized size and patch
# grid for a W x H image (pooling 3): "RW RH GW GH", its size rule in Python
hf_fit() {
	python3 -c 'import math,sys
w,h,p,b=map(int,sys.argv[1:5]); s=3*p; f=math.sqrt(b*9*p*p/(h*w))
th=math.floor(f*h/s)*s; tw=math.floor(f*w/s)*s
if th==0: th,tw=s,min(math.floor(w/h)*s,b*s)
elif tw==0: tw,th=s,min(math.floor(h/w)*s,b*s)
print(tw,th,tw//p,th//p)' "$@"
}

# The fixture's position tables hold 224 positions a side (config.json's
# position_embedding_size): its own budget of 70 asks at most 3 x 70 = 210, but at 280 (an
# mmproj GGUF's default) wide.png (400x9) is a grid of 333x6 patches.  transformers looks
# each column up in its table with F.embedding, which raises IndexError past it; memra
# refuses the image when it prepares it, naming the file, the sizes and the budget, and
# never makes a position up (no soft tokens from rows past the table).
@test "an image whose patch grid passes the position tables is refused by name, as transformers fails there; within them it runs" {
	python3 -c 'import struct,sys,zlib
w,h=9,400
raw=b"".join(b"\0"+bytes((x*37+y*11)%256 for x in range(3*w)) for y in range(h))
def chunk(t,d): return struct.pack(">I",len(d))+t+d+struct.pack(">I",zlib.crc32(t+d))
open(sys.argv[1],"wb").write(b"\x89PNG\r\n\x1a\n"+chunk(b"IHDR",struct.pack(">IIBBBBB",w,h,8,2,0,0,0))+
    chunk(b"IDAT",zlib.compress(raw))+chunk(b"IEND",b""))' "$BATS_TEST_TMPDIR/tall.png"
	n_pos=$(jq .vision_config.position_embedding_size "$V/config.json")
	p=$(jq .vision_config.patch_size "$V/config.json")
	for img in "$V/images/wide.png" "$BATS_TEST_TMPDIR/tall.png"; do
		read -r w h < <(python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); print(*struct.unpack(">II", d[16:24]))' "$img")
		read -r rw rh gw gh < <(hf_fit "$w" "$h" "$p" 280)
		[ $((gw > gh ? gw : gh)) -gt "$n_pos" ]
		why="image of ${w}x$h: ${rw}x$rh for 280 soft tokens is ${gw}x$gh patches, past the tower's $n_pos positions a side"
		for t in "--image-tokens 280" "--mmproj $V/mmproj-f32.gguf" "--mmproj $V/mmproj-bf16.gguf" \
		    "--mmproj $V/mmproj-f16.gguf"; do
			# shellcheck disable=SC2086
			run -1 --separate-stderr run-gen -t 2 -n 2 --ids $t --image "$img" "$V" "What is this?"
			[ "${stderr##*$'\n'}" = "run-gen: $img: $why" ]
			[[ $stderr != *"[vision] $img:"* ]]	# not taken as prepared
		done
		# the fixture's budget: every side within the tables, the gate MATCH
		read -r rw rh gw gh < <(hf_fit "$w" "$h" "$p" 70)
		for t in "" "--mmproj $V/mmproj-f32.gguf --image-tokens 70"; do
			# shellcheck disable=SC2086
			run -0 --separate-stderr run-gen -t 2 -n 2 --ids $t --image "$img" "$V" "What is this?"
			[[ $stderr == *"[vision] $img: ${w}x$h -> ${rw}x$rh, $((gw * gh / 9)) soft tokens"* ]]
			[[ $stderr == *"MATCH"* ]]
		done
	done
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

# --- gguf-random's random towers (the GPU's image-prompt TTFT runs on its 31b-mmproj) ---
# llama.cpp's mtmd is not in the peer build (t/peer/llamacpp-build.sh builds the llama
# target alone, tools off), so the towers are held to its converter's names and keys
# (the fixture's mmproj-f32.gguf), not run in mtmd.

# random_pair [TYPE]: gguf-random's tiny-gemma4 trunk ($P/trunk.gguf) and a tiny-mmproj of
# TYPE ($P/mmproj.gguf, BF16 by default), as tools/gpu-vision-bench.sh makes them
random_pair() {
	GR=$TOP/build/t/tools/gguf-random
	[ -x "$GR" ] || skip "build/t/tools not built (make units)"
	P=$BATS_TEST_TMPDIR
	"$GR" -p tiny-gemma4 -t Q8_0 "$P/trunk.gguf"
	"$GR" -p tiny-mmproj ${1:+-t "$1"} "$P/mmproj.gguf"
}

# hf_tokens W H [BUDGET]: transformers' Gemma-4 image processor's soft tokens for a W x H
# image (patch 16, pooling 3, 280 tokens by default): its size rule in Python
hf_tokens() {
	python3 -c 'import math,sys
w,h,b=int(sys.argv[1]),int(sys.argv[2]),int(sys.argv[3])
f=math.sqrt(b*9*256/(h*w)); th=math.floor(f*h/48)*48; tw=math.floor(f*w/48)*48
print(th*tw//(48*48))' "$1" "$2" "${3:-280}"
}

# The request: the image marker (<|image|>: the third id from the top of the stand-in
# vocabulary of 1000, where gguf-random puts Gemma-4's markers) amid token ids.
RREQ='{"prompt": [300, 301, 302, 997, 303, 304], "n": 4}'

@test "gguf-random's tiny-mmproj on its tiny-gemma4 trunk: run-gen --image runs, the gate MATCH, the same bytes twice, the soft tokens as the image's size says" {
	random_pair
	run -0 --separate-stderr run-gen -t 2 --jsonl --image "$V/images/a.png" --mmproj "$P/mmproj.gguf" \
	    "$P/trunk.gguf" <<<"$RREQ"
	first=$output
	n=$(hf_tokens 61 47)
	[ "$n" = 266 ]
	[[ $stderr == *"[vision] gemma4 tower: 2 layers, hidden 64, patch 16, pool 3, 280 soft tokens an image at most, image rows bidirectional ($P/mmproj.gguf)"* ]]
	[[ $stderr == *"[vision] $V/images/a.png: 61x47 -> 912x672, $n soft tokens"* ]]
	[ "$(jq -r '[.prompt_tokens, .gate, (.ids | length)] | @tsv' <<<"$output")" = "$((5 + n + 2))	MATCH	4" ]
	jq -e '.vision_s > 0 and .ttft_s >= .vision_s + .prefill_s' <<<"$output"
	[[ $stderr == *"time to first token "*" s of it the vision tower, 1 image)"* ]]
	run -0 --separate-stderr run-gen -t 2 --jsonl --image "$V/images/a.png" --mmproj "$P/mmproj.gguf" \
	    "$P/trunk.gguf" <<<"$RREQ"
	[ "$(jq -c '[.ids, .text, .prompt_tokens]' <<<"$output")" = "$(jq -c '[.ids, .text, .prompt_tokens]' <<<"$first")" ]
	# two images, another size each, and a budget of 70
	req='{"prompt": [300, 997, 301, 997, 302], "n": 2}'
	run -0 --separate-stderr run-gen -t 2 --jsonl --image-tokens 70 --image "$V/images/b.jpg" \
	    --image "$V/images/wide.png" --mmproj "$P/mmproj.gguf" "$P/trunk.gguf" <<<"$req"
	read -r w h < <(python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); print(*struct.unpack(">II", d[16:24]))' "$V/images/wide.png")
	nb=$(hf_tokens 200 90 70) nw=$(hf_tokens "$w" "$h" 70)
	[[ $stderr == *"[vision] $V/images/b.jpg: 200x90 -> "*", $nb soft tokens"* ]]
	[[ $stderr == *"[vision] $V/images/wide.png: ${w}x$h -> "*", $nw soft tokens"* ]]
	[ "$(jq -r '[.prompt_tokens, .gate] | @tsv' <<<"$output")" = "$((3 + nb + nw + 4))	MATCH" ]
}

@test "gguf-random's tiny-mmproj: the tower's soft tokens enter the prompt (another image of the same size, other logits; the same image, the same bits), F16 and F32 towers too" {
	random_pair
	VL=$TOP/build/t/tools/vision-logits
	n=$(hf_tokens 61 47)
	# <|image>, the image's soft tokens, <image|>: 996, 997 x n, 998
	ids="300 301 302 996 $(printf '997 %.0s' $(seq "$n"))998 303 304"
	python3 -c 'import random,struct,sys,zlib
w,h=61,47; r=random.Random(7)
raw=b"".join(b"\0"+bytes(r.getrandbits(8) for _ in range(3*w)) for _ in range(h))
def chunk(t,d): return struct.pack(">I",len(d))+t+d+struct.pack(">I",zlib.crc32(t+d))
open(sys.argv[1],"wb").write(b"\x89PNG\r\n\x1a\n"+chunk(b"IHDR",struct.pack(">IIBBBBB",w,h,8,2,0,0,0))+
    chunk(b"IDAT",zlib.compress(raw))+chunk(b"IEND",b""))' "$P/other.png"
	"$VL" -t 2 -i "$V/images/a.png" "$P/trunk.gguf" "$P/mmproj.gguf" "$P/l1" $ids
	"$VL" -t 2 -i "$V/images/a.png" "$P/trunk.gguf" "$P/mmproj.gguf" "$P/l2" $ids
	"$VL" -t 2 -i "$P/other.png" "$P/trunk.gguf" "$P/mmproj.gguf" "$P/l3" $ids
	cmp "$P/l1" "$P/l2"
	# the text rows before the image are the same, every row from the image on differs
	python3 -c 'import numpy as np,sys
a=np.fromfile(sys.argv[1],dtype=np.float32).reshape(-1,1000); b=np.fromfile(sys.argv[2],dtype=np.float32).reshape(-1,1000)
assert np.isfinite(a).all() and np.isfinite(b).all()
same=[bool((a[i]==b[i]).all()) for i in range(len(a))]
sys.exit(0 if same[:4]==[True]*4 and not any(same[4:]) else "rows equal: %s" % same)' "$P/l1" "$P/l3"
	for t in F16 F32; do
		"$TOP/build/t/tools/gguf-random" -p tiny-mmproj -t $t "$P/mm-$t.gguf"
		run -0 --separate-stderr run-gen -t 2 --jsonl --image "$V/images/a.png" --mmproj "$P/mm-$t.gguf" \
		    "$P/trunk.gguf" <<<"$RREQ"
		[ "$(jq -r '[.prompt_tokens, .gate] | @tsv' <<<"$output")" = "$((5 + n + 2))	MATCH" ]
	done
}

@test "a tower whose projection does not fit the trunk's width is refused by name" {
	random_pair
	run -1 --separate-stderr run-gen -t 2 --jsonl --image "$V/images/a.png" --mmproj "$V/mmproj-f32.gguf" \
	    "$P/trunk.gguf" <<<"$RREQ"
	[ "$stderr" = "run-gen: $V/mmproj-f32.gguf: a tower for a text width of 32, the model's is 256" ]
	# and a trunk of another width for gguf-random's tower: the fixture's model (hidden 32)
	run -1 --separate-stderr run-gen -t 2 --jsonl --image "$V/images/a.png" --mmproj "$P/mmproj.gguf" \
	    "$V" <<<'{"prompt": [280, 285, 5], "n": 1}'
	[ "$stderr" = "run-gen: $P/mmproj.gguf: a tower for a text width of 256, the model's is 32" ]
}

@test "gguf-random's towers: llama.cpp's converter's tensor names and keys, gguf-py reads them, 31b-mmproj the size of gemma-4-31B-it's" {
	random_pair F32
	# the fixture's mmproj (llama.cpp's convert_hf_to_gguf.py --mmproj) less its clipped
	# linears' bounds (the large towers have none): the same names and keys
	names() { bin/gguf-inspect -t "$1" | awk -F'\t' 'NR > 1 { print $1 }' | grep -v 'put_m[ai][xn]$' | sort; }
	diff <(names "$V/mmproj-f32.gguf") <(names "$P/mmproj.gguf")
	keys() { bin/gguf-inspect -j "$1" | jq -r '.metadata | keys[]' | grep -v '^general\.\(finetune\|basename\|size_label\)$' | sort; }
	diff <(keys "$V/mmproj-f32.gguf") <(keys "$P/mmproj.gguf")
	need_py gguf
	run -0 python3 -c 'import gguf,sys
r=gguf.GGUFReader(sys.argv[1])
print(len(r.tensors), str(r.fields["clip.vision.projector_type"].contents()), r.fields["clip.vision.projection_dim"].contents())' "$P/mmproj.gguf"
	[ "$output" = "31 gemma4v 256" ]
	# gemma-4-31B-it's tower (transformers' convert_gemma4_weights.py): 27 blocks of 1152,
	# FFN 4304, heads of 72; 13 tensors a block, 5 more (llama.cpp's census of its mmproj: 356)
	run -0 --separate-stderr "$GR" -n -p 31b-mmproj
	l=${lines[-1]} output=$'\n'$output
	e=1152 f=4304 L=27 T=5376
	blk=$((4 * e * e + 3 * e * f + 2 * 72 + 4 * e))
	params=$((L * blk + e * 768 + 2 * 10240 * e + 2 * e + T * e))
	bytes=$((L * (2 * (4 * e * e + 3 * e * f) + 4 * (2 * 72 + 4 * e)) + 4 * e * 768 + 4 * 2 * 10240 * e + 4 * 2 * e + 2 * T * e))
	[ "$l" = "tensors 356 params $params bytes $bytes" ]
	[[ $output == *$'\nv.patch_embd.weight\tF32\t16x16x3x1152\t'* ]]
	[[ $output == *$'\nv.position_embd.weight\tF32\t1152x10240x2\t'* ]]
	[[ $output == *$'\nmm.input_projection.weight\tBF16\t1152x5376\t'* ]]
	[[ $output == *$'\nv.blk.26.ffn_down.weight\tBF16\t4304x1152\t'* ]]
	# F16: the patch embedding F16 too, as the converter writes it
	run -0 --separate-stderr "$GR" -n -p 31b-mmproj -t F16
	[ "${lines[-1]}" = "tensors 356 params $params bytes $((bytes - 2 * e * 768))" ]
	[[ $output == *$'\nv.patch_embd.weight\tF16\t16x16x3x1152\t'* ]]
	run -0 --separate-stderr "$GR" -n -p 26b-mmproj
	[[ $'\n'$output == *$'\nmm.input_projection.weight\tBF16\t1152x2816\t'* ]]
	# refused: a quantized type, a trunk's options, more layers than the tower has
	run -2 --separate-stderr "$GR" -n -p 31b-mmproj -t Q8_0
	[ "$stderr" = "gguf-random: -t Q8_0: a vision tower's weights are F16, BF16 or F32" ]
	run -2 --separate-stderr "$GR" -n -p 31b-mmproj -x IQ4_XS
	[ "$stderr" = "gguf-random: -x, -e and -V are a trunk's: 31b-mmproj is a vision tower" ]
	run -2 --separate-stderr "$GR" -n -p tiny-mmproj -L 3
	[ "$stderr" = "gguf-random: -L 3: shape tiny-mmproj has 2 layers" ]
}

# bats test_tags=gpu
@test "gguf-random's tiny-mmproj on cuda (the tower on the model's backend): the CPU's ids, the gate MATCH" {
	random_pair
	run -0 --separate-stderr run-gen -t 2 --device cpu --jsonl --image "$V/images/a.png" \
	    --mmproj "$P/mmproj.gguf" "$P/trunk.gguf" <<<"$RREQ"
	cpu=$(jq -c .ids <<<"$output")
	run -0 --separate-stderr run-gen --device cuda --jsonl --image "$V/images/a.png" \
	    --mmproj "$P/mmproj.gguf" "$P/trunk.gguf" <<<"$RREQ"
	[ "$(jq -c .ids <<<"$output")" = "$cpu" ]
	[ "$(jq -r .gate <<<"$output")" = MATCH ]
}
