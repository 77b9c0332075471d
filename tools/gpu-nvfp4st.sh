#!/bin/sh
# gpu-nvfp4st.sh: NVFP4 safetensors checkpoints of model A on the GPU (issue 30).
#   usage: OUT=DIR sh tools/gpu-nvfp4st.sh
# Makes the two layouts tools/make-nvfp4-fixtures.py writes (compressed-tensors
# ct/ with its MTP head in model_mtp.safetensors, ModelOpt mo/), then on each:
# kernel-check's model checks (the CUDA backend against the CPU backend, op by
# op, on that checkpoint); run-gen on A's 8 refs prompts, 64 greedy ids, cuda =
# cpu and the argmax gate MATCH 8/8; run-spec -K 1-4 on cuda (the MTP head as
# the draft, every K identical to plain).  Then quant-nvfp4 --keep turns ct/
# into a GGUF of the same weights (the blocks copied, the BF16 tensors kept),
# its ids cuda = cpu, and model-bench's decode tok/s on the safetensors (A)
# and on that GGUF (B), A B B A (tools/abba), into
# $OUT/nvst-abba.{txt,tsv}.  Verdicts in $OUT/nvst.log; exit 0 when all hold.
set -u
OUT=${OUT:-$(mktemp -d)}
cd "$(dirname "$0")/.." || exit 2
A=${A:-models/A}
FX=${TMPDIR:-/tmp}/memra-nvst
[ -d "$A" ] || { echo "gpu-nvfp4st: $A: no model A here" >&2; exit 2; }
make CUDA=1 CUDA_ARCH=90 -j16 all build/t/tools/model-bench >"$OUT/build-nvst.log" 2>&1 ||
    { tail -20 "$OUT/build-nvst.log"; exit 1; }
ok=0
{
	rm -rf "$FX"
	if ! python3 tools/make-nvfp4-fixtures.py "$A" "$FX" >"$OUT/nvst-make.log" 2>&1; then
		echo "make-nvfp4-fixtures.py failed:"; tail -5 "$OUT/nvst-make.log"; ok=1
	fi
	for w in ct mo; do
		m=$FX/$w
		[ -d "$m" ] || { echo "$w: not made"; ok=1; continue; }
		timeout 120 bin/kernel-check "$m" >"$OUT/nvst-kc-$w.log" 2>&1 || ok=1
		echo "$w kernel-check: $(grep -E '^(ALL|[0-9]+ FAILED)' "$OUT/nvst-kc-$w.log" | tail -1)"
		for d in cuda cpu; do
			head -8 "$A/prompts.jsonl" | timeout 120 bin/run-gen --raw --jsonl --ids -n 64 \
			    --device $d "$m" >"$OUT/nvst-$w-$d.jsonl" 2>"$OUT/nvst-$w-$d.err" || ok=1
			sed 's/.*"ids": \[\([^]]*\)\].*/\1/; s/,//g' "$OUT/nvst-$w-$d.jsonl" >"$OUT/nvst-$w-$d.ids"
		done
		n=$(grep -c '"gate": "MATCH"' "$OUT/nvst-$w-cuda.jsonl")
		if [ "$(grep -c . "$OUT/nvst-$w-cuda.ids")" = 8 ] &&
		    cmp -s "$OUT/nvst-$w-cuda.ids" "$OUT/nvst-$w-cpu.ids"; then v=same; else v=DIFF; ok=1; fi
		[ "$n" = 8 ] || ok=1
		echo "$w run-gen: ids cuda=cpu $v (8 prompts, 64 ids), cuda gate MATCH $n of 8"
		grep -h '^\[' "$OUT/nvst-$w-cuda.err" | sort -u | head -6
		head -8 "$A/prompts.jsonl" | timeout 150 bin/run-spec --raw --jsonl -K 1-4 -n 64 \
		    --device cuda "$m" >"$OUT/nvst-spec-$w.log" 2>&1 || ok=1
		np=$(grep -c 'PASS (identical to plain)' "$OUT/nvst-spec-$w.log")
		grep -q 'FAIL (' "$OUT/nvst-spec-$w.log" && ok=1
		echo "$w run-spec -K 1-4 cuda: $np PASS lines, $(grep -c 'FAIL (' "$OUT/nvst-spec-$w.log") FAIL"
	done
	# the GGUF of the same weights: the NVFP4 blocks copied, every other tensor kept as the
	# checkpoint has it (--keep; the norms and GDN vectors F32 as the test of t/nvfp4-st.bats
	# does). Its ids may part from the checkpoint's: an HF checkpoint takes transformers'
	# GDN L2 norm, a GGUF llama.cpp's (t/model.bats), on the CPU too; said, not a gate.
	if bin/quant-nvfp4 --tensor-type '(norm\.weight|ssm_a|ssm_dt\.bias|ssm_conv1d\.weight)$=f32' \
	    --keep '.*' "$FX/ct" "$FX/ct.gguf" >"$OUT/nvst-gguf.log" 2>&1; then
		for d in cuda cpu; do
			head -8 "$A/prompts.jsonl" | timeout 120 bin/run-gen --raw --jsonl --ids -n 64 \
			    --device $d "$FX/ct.gguf" 2>/dev/null |
			    sed 's/.*"ids": \[\([^]]*\)\].*/\1/; s/,//g' >"$OUT/nvst-ctgguf-$d.ids"
		done
		if cmp -s "$OUT/nvst-ctgguf-cuda.ids" "$OUT/nvst-ctgguf-cpu.ids"; then v=same; else v=DIFF; ok=1; fi
		echo "ct -> GGUF (quant-nvfp4 --keep): run-gen ids cuda=cpu $v;" \
		    "$(paste -d '|' "$OUT/nvst-ctgguf-cuda.ids" "$OUT/nvst-ct-cuda.ids" |
		    awk -F'|' '$1 == $2 { n++ } END { print n + 0 }') of 8 prompts as the checkpoint's"
		# where they part, when they do (2 of 8 prompts on an H100 in session 22: one a
		# near-tie of 0.016 on the CPU, one at a CPU margin of 0.25 over the GPU's pick):
		# the GGUF's own model checks, GPU against CPU, and each prompt's first
		# differing position
		if [ $v = DIFF ]; then
			timeout 120 bin/kernel-check "$FX/ct.gguf" >"$OUT/nvst-kc-ctgguf.log" 2>&1 || ok=1
			echo "ct.gguf kernel-check: $(grep -E '^(ALL|[0-9]+ FAILED)' "$OUT/nvst-kc-ctgguf.log" | tail -1)"
			grep -E '^model ' "$OUT/nvst-kc-ctgguf.log"
			paste -d '|' "$OUT/nvst-ctgguf-cuda.ids" "$OUT/nvst-ctgguf-cpu.ids" | awk -F'|' '{
			    n = split($1, a, " "); split($2, b, " ")
			    for (i = 1; i <= n; i++) if (a[i] != b[i]) {
				printf "prompt %d: first differs at new token %d (cuda %s, cpu %s)\n", NR, i, a[i], b[i]; break } }'
		fi
		b="build/t/tools/model-bench -d cuda -c 128 -n 64 -r 3 -k 0"
		timeout 300 python3 tools/abba -a "$b $FX/ct" -b "$b $FX/ct.gguf" \
		    -r 'decode-median.*?tok_s\s+([0-9.]+)' --unit tok/s --blocks 2 \
		    --tsv "$OUT/nvst-abba.tsv" --log "$OUT/nvst-abba.log" --binary model-bench \
		    --model A-nvfp4-ct --quant NVFP4 --scenario decode-b1-gguf-vs-safetensors --ctx 128 \
		    --peer safetensors >"$OUT/nvst-abba.txt" 2>&1 || { echo "abba failed"; ok=1; }
		cat "$OUT/nvst-abba.txt"
	else
		echo "quant-nvfp4 ct -> GGUF failed:"; tail -3 "$OUT/nvst-gguf.log"; ok=1
	fi
	[ $ok = 0 ] && echo "NVFP4 SAFETENSORS GPU PASS" || echo "NVFP4 SAFETENSORS GPU FAIL"
} >"$OUT/nvst.log" 2>&1
cat "$OUT/nvst.log"
exit $ok
