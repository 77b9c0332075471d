bats_require_minimum_version 1.5.0
# lib/quant against its peers, byte for byte, through build/t/tools/quant-cli:
# gguf-py's quants module, and ggml's own reference C (built from the
# llama-cpp-python sdist that t/all.sh downloads into build/peer-cache).
setup() {
	load helper
	CLI=$TOP/build/t/tools/quant-cli
	[ -x "$CLI" ] || skip "build/t/tools/quant-cli not built (make units)"
}

# ggml_peer: path of ggml-peer, built once into build/peer; skips (or fails
# under MEMRA_REQUIRE_PEERS=1) when the sdist is not in the cache
ggml_peer() {
	local st=0
	PEER=$(sh "$TOP/t/peer/ggml-ref.sh" "$TOP/build/peer") || st=$?
	if [ "$st" -eq 3 ]; then
		[ "${MEMRA_REQUIRE_PEERS:-0}" = 1 ] && { echo "llama-cpp-python sdist missing" >&2; return 1; }
		skip "llama-cpp-python sdist not in build/peer-cache (t/all.sh downloads it)"
	fi
	[ "$st" -eq 0 ]
}

@test "quantize and dequantize match gguf-py byte for byte" {
	need_py numpy gguf
	run -0 python3 "$TOP/t/peer/quant_peer.py" --ref gguf --cli "$CLI" --seeds 20
	[[ $output != *"not ok"* ]]
	[[ $output == *"ok quantize Q4_0"* && $output == *"ok dequantize NVFP4"* ]]
}

@test "quantize and dequantize match ggml's reference C byte for byte" {
	need_py numpy
	ggml_peer
	run -0 python3 "$TOP/t/peer/quant_peer.py" --ref ggml --peer "$PEER" --cli "$CLI" --seeds 20
	[[ $output != *"not ok"* ]]
	[[ $output == *"ok quantize Q4_K"* && $output == *"ok quantize NVFP4"* ]]
}

@test "the peer comparison catches a single flipped bit" {
	need_py numpy gguf
	cat >"$BATS_TEST_TMPDIR/bad-cli" <<-SH
	#!/bin/sh
	"$CLI" "\$@" | python3 -c 'import sys; b = bytearray(sys.stdin.buffer.read()); b[-1] ^= 1; sys.stdout.buffer.write(b)'
	SH
	chmod +x "$BATS_TEST_TMPDIR/bad-cli"
	run -1 python3 "$TOP/t/peer/quant_peer.py" --ref gguf --cli "$BATS_TEST_TMPDIR/bad-cli" --seeds 1 --types Q8_0
	[[ $output == *"not ok quantize Q8_0"* ]]
}

@test "quantizing a NaN fails and names the element" {
	python3 -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<32f", *([1.0] * 5 + [float("nan")] + [0.0] * 26)))' \
	    >"$BATS_TEST_TMPDIR/nan.f32"
	run -1 --separate-stderr "$CLI" q Q8_0 <"$BATS_TEST_TMPDIR/nan.f32"
	[ "$stderr" = "quant-cli: quantize: element 5 is NaN" ]
}

@test "a row that is not whole blocks is refused" {
	head -c 40 /dev/zero >"$BATS_TEST_TMPDIR/ten.f32"
	run -1 --separate-stderr "$CLI" q Q4_K <"$BATS_TEST_TMPDIR/ten.f32"
	[[ $stderr == *"not whole blocks"* ]]
}

@test "the ASan+UBSan build agrees with ggml on the edge cases too" {
	need_py numpy
	[ -x "$TOP/build-san/t/tools/quant-cli" ] || skip "no sanitizer build (make SAN=1 units)"
	ggml_peer
	run -0 python3 "$TOP/t/peer/quant_peer.py" --ref ggml --peer "$PEER" \
	    --cli "$TOP/build-san/t/tools/quant-cli" --seeds 2
	[[ $output != *"not ok"* ]]
}
