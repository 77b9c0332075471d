#!/bin/sh
# make-gemma4-vision-half.sh: the BF16 and F16 renditions of g4-vision's tower,
# t/data/gemma4/g4-vision/mmproj-bf16.gguf and mmproj-f16.gguf: llama.cpp's
# mmproj-f32.gguf (tools/make-gemma4-vision.py) through our quant-nvfp4 --type
# BF16 / F16, the position tables kept in F32 (as llama.cpp's converter writes
# them whatever its --outtype); the 1-D tensors (norms, clip bounds, std) stay
# F32 by quant-nvfp4's own rule.  Their matrices (patch embedding, linears,
# projection) hold the F32 tower's values rounded to BF16 / F16 (nearest, ties
# to even), so their products take half operands (lib/vision.h).
#   usage: sh tools/make-gemma4-vision-half.sh    (after make: needs bin/quant-nvfp4)
set -eu
cd "$(dirname "$0")/.."
V=t/data/gemma4/g4-vision
[ -x bin/quant-nvfp4 ] || { echo "make-gemma4-vision-half.sh: bin/quant-nvfp4: not built" >&2; exit 2; }
for t in BF16 F16; do
	out=$V/mmproj-$(echo "$t" | tr 'A-Z' 'a-z').gguf
	bin/quant-nvfp4 --type "$t" --keep 'position_embd' "$V/mmproj-f32.gguf" "$out"
	echo "$out"
done
