bats_require_minimum_version 1.5.0
# The GPU gate and benchmark helpers (build/t/tools/model-spec, gguf-random,
# model-bench) and the CUDA device name, run on the CPU backend here; the
# device runs them with -d cuda (tools/gpu-run.sh).
setup() {
	load helper
	T=$TOP/build/t/tools
	[ -x "$T/model-spec" ] && [ -x "$T/gguf-random" ] && [ -x "$T/model-bench" ] ||
	    skip "build/t/tools not built (make units)"
}

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

@test "device 'cuda' without a GPU or without CUDA fails and says why" {
	has_gpu && skip "a GPU is present"
	d=$(model_a)
	run -1 --separate-stderr "$T/model-spec" -d cuda "$d" /dev/null
	[[ $stderr == "model-spec: backend: 'cuda': built without CUDA" ||
	    $stderr == "model-spec: no CUDA device" ]]
}

@test "speculative decoding equals greedy on model A (K = 1, 2) and greedy equals itself" {
	d=$(model_a)
	head -1 "$TOP/t/data/a-greedy.tsv" >"$BATS_TEST_TMPDIR/case"
	run -0 --separate-stderr "$T/model-spec" -g cpu:scalar -K 2 -n 12 "$d" "$BATS_TEST_TMPDIR/case"
	[ "${lines[1]}" = "K=1 equal-greedy 1/1 drafted 5 accepted 5 rounds 5 rate 1.000" ]
	[[ ${lines[2]} == "K=2 equal-greedy 1/1 "* ]]
	[ "${lines[3]}" = "SELF-CONSISTENCY PASS" ]
	[[ ${lines[4]} == "GREEDY cpu-"*" = cpu-scalar: 1 equal, 0 near-ties, 0 differ: PASS" ]]
}

@test "gguf-random writes a qwen35 GGUF that loads and decodes" {
	f=$BATS_TEST_TMPDIR/tiny.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t NVFP4 "$f"
	run -0 --separate-stderr gguf-inspect -k general.architecture "$f"
	[ "$output" = "qwen35" ]
	run -0 --separate-stderr gguf-inspect -k qwen35.block_count "$f"
	[ "$output" = "5" ]
	run -0 --separate-stderr "$T/model-bench" -d cpu -c 20 -n 2 -r 1 -k 1 "$f"
	[[ ${lines[1]} == "prefill-cold	ctx	20	"* ]]
	[[ ${lines[2]} == "prefill	ctx	20	"* ]]
	[[ ${lines[4]} == "decode-median	ctx	20	n	2	reps	1	"* ]]
	[[ ${lines[5]} == "verify	K	1	rows	2	"* ]]
	# -b: three sequences decoding together, as serve's steps do
	run -0 --separate-stderr "$T/model-bench" -d cpu -c 12 -n 2 -r 2 -k 0 -b 3 "$f"
	[[ ${lines[6]} == "decode-batch	B	3	ctx	12	rep	0	ms_per_step	"* ]]
	[[ ${lines[7]} == "decode-batch	B	3	ctx	12	rep	1	ms_per_step	"* ]]
	[[ ${lines[8]} == "decode-batch-median	B	3	ctx	12	n	2	reps	2	ms_per_step	"*"	x_step	"* ]]
	run -2 --separate-stderr "$T/model-bench" -d cpu -b 0 "$f"
	[ "$stderr" = "model-bench: bad -b: 1..256" ]
}

@test "gguf-random's file also loads and evaluates in llama.cpp (llama-bench runs on the same files)" {
	need_llama_cpp
	f=$BATS_TEST_TMPDIR/tiny.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t Q8_0 "$f"
	run -0 --separate-stderr python3 -c 'import sys, llama_cpp
m = llama_cpp.Llama(sys.argv[1], n_ctx=64, verbose=False)
m.eval([5, 6, 7])
print(m.n_vocab(), len(m.scores[2]))' "$f"
	[ "$output" = "1000 1000" ]
}

@test "gguf-random refuses an unknown shape or type, and -L outside the shape" {
	run -2 --separate-stderr "$T/gguf-random" -p 70b "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -p '70b': not a shape (9b, 27b, tiny, 35b-a3b, tiny-moe, 31b, 26b-a4b, tiny-gemma4, 196b-a11b, tiny-step, 31b-mmproj, 26b-mmproj, tiny-mmproj)" ]
	run -2 --separate-stderr "$T/gguf-random" -t Q9 "$BATS_TEST_TMPDIR/x.gguf"
	run -2 --separate-stderr "$T/gguf-random" -x Q9 "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -x 'Q9': not a type name" ]
	run -2 --separate-stderr "$T/gguf-random" -p tiny-step -L 6 "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -L 6: shape tiny-step has 5 layers" ]
	run -2 --separate-stderr "$T/gguf-random" -p tiny-gemma4 -L 5 "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -L 5: a gemma4 file needs -L 6 or more (a full-attention layer and a sliding one)" ]
	run -2 --separate-stderr "$T/gguf-random" -p 9b -L 0x "$BATS_TEST_TMPDIR/x.gguf"
	[ "$stderr" = "gguf-random: -L '0x': not a layer count" ]
	run -2 --separate-stderr "$T/gguf-random" -n "$BATS_TEST_TMPDIR/x.gguf"
	[[ $stderr == "gguf-random: usage: "* ]]
	[ ! -e "$BATS_TEST_TMPDIR/x.gguf" ]
}

@test "gguf-random's qwen35moe, gemma4 and step35 tiny shapes load and decode in memra (id prompts)" {
	for p in tiny-moe:qwen35moe:5 tiny-gemma4:gemma4:6 tiny-step:step35:5; do
		f=$BATS_TEST_TMPDIR/${p%%:*}.gguf
		run -0 --separate-stderr "$T/gguf-random" -V -p "${p%%:*}" -t Q8_0 -x IQ4_XS "$f"
		run -0 --separate-stderr gguf-inspect -k general.architecture "$f"
		[ "$output" = "$(cut -d: -f2 <<<"$p")" ]
		run -0 --separate-stderr gguf-inspect -k "$output.block_count" "$f"
		[ "$output" = "${p##*:}" ]
		run -0 --separate-stderr run-gen --jsonl -t 2 --device cpu "$f" \
		    <<<'{"prompt": [5, 17, 250], "n": 5, "ignore_eos": true}'
		run -0 python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert len(r["ids"]) == 5 and r["prompt_tokens"] == 3 and r["gate"] == "MATCH", r' "${lines[0]}"
	done
}

@test "gguf-random's qwen35moe, gemma4 and step35 tiny shapes also load and evaluate in llama.cpp, with block fallbacks" {
	need_llama_cpp
	for a in "tiny-moe -t Q4_K" "tiny-gemma4 -t Q4_K" "tiny-step -t Q8_0 -x IQ4_XS" "tiny-step -L 2"; do
		f=$BATS_TEST_TMPDIR/x.gguf
		run -0 --separate-stderr "$T/gguf-random" -p $a "$f"
		run -0 --separate-stderr python3 -c 'import sys, math, llama_cpp
m = llama_cpp.Llama(sys.argv[1], n_ctx=64, verbose=False)
m.eval([5, 6, 7])
print(m.n_vocab(), len(m.scores[2]), all(math.isfinite(x) for x in m.scores[2]))' "$f"
		[ "$output" = "1000 1000 True" ]
	done
	# the rows of 128 and 96 that a Q4_K or IQ4_XS block (256) does not divide
	run -0 --separate-stderr "$T/gguf-random" -n -p tiny-moe -t Q4_K
	[[ $output == *$'blk.0.ffn_down_exps.weight\tQ5_0\t128x256x8\t'* ]]
	run -0 --separate-stderr "$T/gguf-random" -n -p tiny-step -t Q8_0 -x IQ4_XS
	[[ $output == *$'blk.1.ffn_up_exps.weight\tIQ4_XS\t256x128x8\t'* ]]
	[[ $output == *$'blk.1.ffn_down_exps.weight\tIQ4_NL\t128x256x8\t'* ]]
}

# The tensor counts by layer kind (llama.cpp's converter's layout) and the
# published sizes: 35B, 31B (30.7B), 26B (25.2B), 196B.
@test "gguf-random -n lists the big shapes' tensors: their counts by layer kind, their sizes the models' published ones" {
	params() { run -0 --separate-stderr "$T/gguf-random" -n "$@"; n=${lines[-1]}; n=${n#tensors }; }
	params -p 35b-a3b	# 30 GDN layers of 19, 10 full of 16, the MTP one of 20; embd, norm, output
	[ "${n%% *}" = $((30 * 19 + 10 * 16 + 20 + 3)) ]
	p=$(awk '{print $3}' <<<"$n"); [ "$p" -ge 35000000000 ] && [ "$p" -lt 36000000000 ]
	params -p 31b		# 50 sliding layers of 14, 10 global of 13 (no V); rope_freqs, embd, norm
	[ "${n%% *}" = $((50 * 14 + 10 * 13 + 3)) ]
	p=$(awk '{print $3}' <<<"$n"); [ "$p" -ge 30500000000 ] && [ "$p" -lt 31500000000 ]
	params -p 26b-a4b	# each layer 8 more: router, its scale, 2 expert stacks, their scale, 3 norms
	[ "${n%% *}" = $((25 * 22 + 5 * 21 + 3)) ]
	p=$(awk '{print $3}' <<<"$n"); [ "$p" -ge 25000000000 ] && [ "$p" -lt 26000000000 ]
	params -p 196b-a11b -t IQ4_XS	# 3 dense layers of 12, 42 MoE of 17; embd, norm, output
	[ "${n%% *}" = $((3 * 12 + 42 * 17 + 3)) ]
	p=$(awk '{print $3}' <<<"$n"); [ "$p" -ge 196000000000 ] && [ "$p" -lt 197000000000 ]
	b=$(awk '{print $5}' <<<"$n"); [ "$b" -gt 64000000000 ]	# over a 64 GB disk: -L
	params -p 196b-a11b -t Q8_0 -x IQ4_XS -L 24
	[ "${n%% *}" = $((3 * 12 + 21 * 17 + 3)) ]
	b=$(awk '{print $5}' <<<"$n"); [ "$b" -lt 64000000000 ]
	[[ $output == *$'\nblk.23.ffn_up_exps.weight\tIQ4_XS\t4096x1280x288\t'* ]]
	[[ $output != *$'\nblk.24.'* ]]
}

@test "serve answers token-id prompts on gguf-random's file (its stand-in BPE vocabulary has an empty merges list), as the serving benchmark sends them" {
	load serve
	P=$BATS_TEST_TMPDIR
	f=$P/tiny.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t Q8_0 "$f"
	start_serve MEMRA_MODELS="r=$f" MEMRA_MAX_SESSIONS=2 MEMRA_CTX=128
	run -0 http POST /v1/completions '{"model":"r","prompt":[5,6,7,8],"max_tokens":6,"temperature":0,"ignore_eos":true}' -H 'Content-Type: application/json'
	stop_serve
	[[ $output == "200 "* ]]
	[ "$(printf '%s' "${output#200 }" | jq -r .usage.completion_tokens)" = 6 ]
	[ "$(printf '%s' "${output#200 }" | jq -r .usage.prompt_tokens)" = 4 ]
}

# two free TCP ports of 127.0.0.1, as "A B"
free_ports() {
	python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])'
}

# 0 when something accepts connections on 127.0.0.1:$1
port_open() {
	python3 -c 'import socket, sys
s = socket.socket(); s.settimeout(2)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)' "$1"
}

@test "serve-abba benchmarks each arm's own server and leaves none behind: a port already taken is refused, and a SIGTERM mid-run stops the server that runs" {
	P=$BATS_TEST_TMPDIR
	f=$P/tiny.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t Q8_0 "$f"
	read -r pa pb <<<"$(free_ports)"
	srv() { echo "MEMRA_MODELS=r=$f MEMRA_MAX_SESSIONS=2 MEMRA_CTX=96 MEMRA_HOST=127.0.0.1 MEMRA_PORT=$1 $TOP/bin/serve --device cpu -t 1"; }
	abba() { python3 "$TOP/tools/serve-abba.py" -a "$(srv "$pa")" -b "$(srv "$pb")" --port-a "$pa" --port-b "$pb" "$@"; }
	run -0 abba --bench "-c 1 -n 1 -p 8 -g 4 --vocab 1000" --tsv "$P/r.tsv" --log "$P/r.log"
	[ "$(grep -c '^== ' "$P/r.log")" = 4 ]
	[ "$(grep -c $'\tserve-c1\t' "$P/r.tsv")" = 1 ]
	run -1 port_open "$pa"
	run -1 port_open "$pb"
	# a listener on A's port (a server left from an earlier run): refused before any run
	python3 -c 'import socket, time, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(60)' "$pa" &
	L=$!
	for _ in $(seq 50); do port_open "$pa" && break; sleep 0.1; done
	run -1 --separate-stderr abba --bench "-c 1 -n 1 -p 8 -g 4 --vocab 1000" --log "$P/x.log"
	kill "$L"; wait "$L" || true
	[ "$stderr" = "serve-abba: port $pa: something listens there before the server starts (a server left from an earlier run?)" ]
	[ ! -s "$P/x.log" ]
	# SIGTERM while A's server answers a long bench: serve-abba stops it before exiting
	python3 "$TOP/tools/serve-abba.py" -a "$(srv "$pa")" -b "$(srv "$pb")" --port-a "$pa" \
	    --port-b "$pb" --bench "-c 1 -n 40 -p 8 -g 80 --vocab 1000" --log "$P/t.log" 2>/dev/null &
	A=$!
	for _ in $(seq 300); do grep -q '"POST /v1/completions\|request 1:' "$P/t.log" 2>/dev/null && break; sleep 0.1; done
	port_open "$pa"
	kill -TERM "$A"
	st=0; wait "$A" || st=$?
	[ "$st" = 143 ]
	run -1 port_open "$pa"
	[ -z "$(pgrep -f "MEMRA_PORT=$pa")" ]
}

@test "serve-turns idturns: conversations by token ids (prompts and replies as ids, return_token_ids); a later turn reports the tokens it did not recompute" {
	load serve
	P=$BATS_TEST_TMPDIR
	f=$P/tiny.gguf
	run -0 --separate-stderr "$T/gguf-random" -p tiny -t Q8_0 "$f"
	start_serve MEMRA_MODELS="r=$f" MEMRA_MAX_SESSIONS=2 MEMRA_CTX=160 MEMRA_PREFILL_CHUNK=32
	run -0 --separate-stderr python3 "$TOP/tools/serve-turns.py" "$URL" idturns -c 2 -t 3 -p 40 -q 8 -g 6 --vocab 1000 --turns-log "$P/t.jsonl"
	stop_serve
	[ "$(jq -r '[.c, .turns, .first, .new, .gen] | @tsv' <<<"$output")" = "2	3	40	8	6" ]
	jq -e '.turn1_ttft_ms > 0 and .turnN_ttft_ms > 0 and .agg_tok_s > 0 and .cached_tokens > 0' <<<"$output"
	# each conversation: 48 ids, then 48 + 6 + 8, then 62 + 6 + 8; cold first, then resumed
	[ "$(jq -r '[.conversation, .turn, .prompt_tokens] | @tsv' "$P/t.jsonl" | sort | tr '\t\n' ' ,')" = "0 1 48,0 2 62,0 3 76,1 1 48,1 2 62,1 3 76," ]
	[ "$(jq -r 'select(.turn == 1) | .cached_tokens' "$P/t.jsonl" | sort -u)" = 0 ]
	[ "$(jq -r 'select(.turn == 2) | .cached_tokens' "$P/t.jsonl" | sort -u)" = 32 ]
	# a server that cannot answer: the run fails, naming why
	run -1 --separate-stderr python3 "$TOP/tools/serve-turns.py" "$URL" idturns -c 1 -t 1 -p 4 -q 4 -g 2
	[[ $stderr == "serve-turns: "*"Connection refused"* ]]
}

@test "gpu-vision-bench.sh on the CPU at tiny shapes: its own random trunk and tower (made once), A B B A rows of image-prompt TTFT against text of the same token count" {
	[ -x "$T/image-prep" ] || skip "build/t/tools not built (make units)"
	P=$BATS_TEST_TMPDIR
	# transformers' Gemma-4 resize rule (patch 16, pooling 3): a W x H image's soft tokens
	tok() { python3 -c 'import math,sys
w,h,b=map(int,sys.argv[1:]); f=math.sqrt(b*9*256/(h*w))
print(math.floor(f*h/48)*math.floor(f*w/48))' "$@"; }
	bench() { TMPDIR=$P GPU_VISION_SHAPE=tiny-gemma4 GPU_VISION_DEVICE=cpu GPU_VISION_THREADS=2 \
	    GPU_VISION_IMAGES=${GPU_VISION_IMAGES:-96x64:1 48x48:2} GPU_VISION_TOKENS=70 sh "$TOP/tools/gpu-vision-bench.sh" "$@"; }
	run -0 bench - - "$P/o"
	a=$(tok 96 64 70) b=$(tok 48 48 70)
	[[ $output == *"== ttft-img-96x64x1: 1 image(s) of 96x64, $a soft tokens, prompt $((16 + 1 + a + 2)) tokens"* ]]
	[[ $output == *"== ttft-img-48x48x2: 2 image(s) of 48x48, $((2 * b)) soft tokens, prompt $((16 + 2 + 2 * b + 4)) tokens"* ]]
	# one row a scenario: run-gen, the two files' types, the prompt's tokens, 2 runs an arm
	cut -f 4,6,7,8,9,13,14 "$P/o/vision-abba.tsv" >"$P/cols"
	printf 'binary\tquant\tscenario\tctx\tn\tunit\tpeer\nrun-gen\tQ8_0+BF16\tttft-img-96x64x1\t%d\t2\ts\ttext-ids-same-count\nrun-gen\tQ8_0+BF16\tttft-img-48x48x2\t%d\t2\ts\ttext-ids-same-count\n' \
	    $((19 + a)) $((22 + 2 * b)) | diff - "$P/cols"
	# the summary: the tower's time a part of B's TTFT
	[ "$(grep -c $'^ttft-img-.*\tB ttft .* vision [0-9.]* s\tB/A ' "$P/o/vision-summary.txt")" = 2 ]
	ls "$P/memra-gguf/gemma4-tiny-gemma4-random-Q8_0.gguf" "$P/memra-gguf/gemma4-tiny-mmproj-random-BF16.gguf"
	# kept: a second run makes neither again; given files, their types in the rows
	touch -d '2000-01-01' "$P"/memra-gguf/*.gguf
	GPU_VISION_IMAGES=48x48:1 run -0 bench
	[ -z "$(find "$P/memra-gguf" -name '*.gguf' -newermt '2001-01-01')" ]
	"$T/gguf-random" -p tiny-mmproj -t F16 "$P/f16.gguf"
	GPU_VISION_IMAGES=48x48:1 run -0 bench "$P/memra-gguf/gemma4-tiny-gemma4-random-Q8_0.gguf" \
	    "$P/f16.gguf" "$P/o2"
	[ "$(cut -f 5,6,7 "$P/o2/vision-abba.tsv" | tail -n 1)" = $'gemma4-tiny-gemma4-random-Q8_0.gguf + f16.gguf\tQ8_0+F16\tttft-img-48x48x1' ]
	# a trunk without Gemma-4's image markers, misuse
	"$T/gguf-random" -p tiny -t Q8_0 "$P/q.gguf"
	run -1 --separate-stderr bench "$P/q.gguf" "$P/memra-gguf/gemma4-tiny-mmproj-random-BF16.gguf" "$P/o3"
	[ "$stderr" = "gpu-vision-bench.sh: $P/q.gguf: no <|image|> token in its vocabulary" ]
	run -2 --separate-stderr bench "$P/q.gguf"
	[ "$stderr" = "usage: sh tools/gpu-vision-bench.sh [TRUNK MMPROJ [OUTDIR]]" ]
}
