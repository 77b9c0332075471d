#!/bin/sh
# gpu-arch-bench.sh: the wave-2 architectures' speed against llama.cpp's
# llama-bench on the same random-weight file of a real shape, the same GPU,
# interleaved A B B A (tools/abba; issues 27, 28, 29).
#   usage: OUT=DIR sh tools/gpu-arch-bench.sh LLAMA_BENCH [SPEC ...]
#     LLAMA_BENCH  llama-bench's path (tools/llamacpp-cuda.sh's build); a file
#                  holding the path in its last line works too (the build's
#                  stdout), and then the script waits for the build
#                  (GPU_ARCH_WAIT s, default 420); "-": no llama-bench rows
#                  (GPU_ARCH_AB and GPU_ARCH_PROF only)
#     SPEC         SHAPE:TYPE[:EXPERTS[:LAYERS]], gguf-random's -p, -t, -x and
#                  -L (LAYERS: the first N layers only, a speed per layer for a
#                  shape the disk cannot hold); default 35b-a3b:Q4_K
#                  31b:Q6_K 26b-a4b:Q4_K 196b-a11b:Q8_0:IQ4_XS:8 (the cookbook's
#                  types where llama.cpp has them: Ornith's NVFP4 is memra's
#                  own, so its peer row is at Q4_K)
# Environment: GPU_ARCH_SCEN (default "decode prefill": llama-bench tg128
# against model-bench's 64 tokens after a 128-token prompt, pp512 against a
# 512-token prompt), GPU_ARCH_BLOCKS (A B B A blocks, default 1), OUT (logs and
# the TSV rows, arch-abba.tsv), MEMRA_COMMIT (the commit the rows name),
# GPU_ARCH_PROF=1 (after a file's A B B A: where the device's time goes in its
# decode step, K=3 verify and 512-token prefill, per kernel: model-bench -P into
# arch-prof-NAME-QUANT.txt, its costliest kernels on stdout; a GPU's only),
# GPU_ARCH_AB=VAR=X:Y (after a file's A B B A against llama-bench: each
# scenario's model-bench with VAR=X (A) against VAR=Y (B), A B B A, rows
# named SCENARIO-VAR-X-vs-Y; e.g. MEMRA_CUDA_QKT=0:1, MEMRA_CUDA_MOE_GROUP=cc:1,
# MEMRA_CUDA_Q6K_PACK=0:1),
# GPU_ARCH_DEVICE (model-bench's device, default cuda; cpu tries the script
# on a machine without a GPU against any llama-bench stand-in).  A
# is llama-bench, B model-bench; each file is removed after its runs (GPU_ARCH_KEEP=1 aside).
# GPU_ARCH_KEEP=1 keeps each file in $TMPDIR/memra-gguf (default /tmp) and uses one
# already there (a later call on a still-warm machine skips gguf-random).
# Needs build/t/tools/model-bench and build/t/tools/gguf-random built with CUDA=1.
set -u
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=tools/peer-scen.sh
. tools/peer-scen.sh
[ $# -ge 1 ] || { echo "usage: sh tools/gpu-arch-bench.sh LLAMA_BENCH [SPEC ...]" >&2; exit 2; }
lb=$1; shift
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
ab=${GPU_ARCH_AB:-}
case $ab in
''|*=*:*) ;;
*) echo "gpu-arch-bench.sh: GPU_ARCH_AB=$ab: not VAR=X:Y" >&2; exit 2 ;;
esac
if [ "$lb" = - ]; then
	[ -n "$ab" ] || [ "${GPU_ARCH_PROF:-0}" = 1 ] ||
		{ echo "gpu-arch-bench.sh: no llama-bench, no GPU_ARCH_AB, no GPU_ARCH_PROF: nothing to run" >&2; exit 2; }
elif [ -f "$lb" ] && [ ! -x "$lb" ]; then	# the build's stdout: wait for its last line
	t0=$(date +%s)
	while ! { p=$(tail -n 1 "$lb" 2>/dev/null) && [ -n "$p" ] && [ -x "$p" ]; }; do
		[ $(( $(date +%s) - t0 )) -lt "${GPU_ARCH_WAIT:-420}" ] ||
			{ echo "gpu-arch-bench.sh: llama-bench not built after ${GPU_ARCH_WAIT:-420} s" >&2; exit 1; }
		sleep 5
	done
	lb=$p
fi
[ "$lb" = - ] || [ -x "$lb" ] || { echo "gpu-arch-bench.sh: $lb: not an executable" >&2; exit 2; }
[ $# -ge 1 ] || set -- 35b-a3b:Q4_K 31b:Q6_K 26b-a4b:Q4_K 196b-a11b:Q8_0:IQ4_XS:8
G=${TMPDIR:-/tmp}/memra-gguf
mkdir -p "$G"
ok=0
for spec in "$@"; do
	IFS=: read -r shape t x l <<EOF
$spec
EOF
	if [ -z "$shape" ] || [ -z "$t" ]; then
		echo "gpu-arch-bench.sh: $spec: not SHAPE:TYPE[:EXPERTS[:LAYERS]]" >&2; exit 2
	fi
	f=$G/arch-$shape-$t${x:+-x$x}${l:+-L$l}.gguf
	name=$shape${l:+-L$l}
	quant=$t${x:++$x}
	if [ "${GPU_ARCH_KEEP:-0}" = 1 ] && [ -s "$f" ]; then
		echo "== $name $quant: $f kept from an earlier run"
	elif ! build/t/tools/gguf-random -p "$shape" -t "$t" ${x:+-x "$x"} ${l:+-L "$l"} "$f" \
	    >"$OUT/arch-gguf-$name-$quant.log" 2>&1; then
		echo "== $name $quant: gguf-random failed: $(tail -n 1 "$OUT/arch-gguf-$name-$quant.log")"
		ok=1; rm -f "$f"; continue
	fi
	for sc in ${GPU_ARCH_SCEN:-decode prefill}; do
		peer_scen "$sc" "$lb" "$f" "${GPU_ARCH_DEVICE:-cuda}" ||
			{ echo "GPU_ARCH_SCEN: $sc: unknown" >&2; exit 2; }
		# shellcheck disable=SC2086
		set -- $ps_cols
		if [ -n "$ab" ]; then	# model-bench under VAR=X (A) against VAR=Y (B)
			v=${ab%%=*} xy=${ab#*=}
			sab=${1%-vs-llama.cpp}-$v-${xy%%:*}-vs-${xy#*:}
			echo "== $name $quant: $sc tok/s, A = model-bench $v=${xy%%:*}, B = $v=${xy#*:}"
			timeout 560 python3 tools/abba -a "env $v=${xy%%:*} $b" -b "env $v=${xy#*:} $b" \
			    -r "$r" --unit tok/s --blocks "${GPU_ARCH_BLOCKS:-1}" --tsv "$OUT/arch-abba.tsv" \
			    --log "$OUT/arch-ab-$sc-$name-$quant.log" --binary model-bench \
			    --model "random-$name" --quant "$quant" --scenario "$sab" --ctx "$2" \
			    --peer "model-bench-$v=${xy%%:*}" ||
				{ echo "abba $sc $name $quant $ab: failed"; ok=1; }
		fi
		[ "$lb" != - ] || continue
		echo "== $name $quant: $sc tok/s, A = $3, B = model-bench"
		timeout 560 python3 tools/abba -a "$a" -b "$b" -r "$r" --unit tok/s \
		    --blocks "${GPU_ARCH_BLOCKS:-1}" --tsv "$OUT/arch-abba.tsv" \
		    --log "$OUT/arch-abba-$sc-$name-$quant.log" --binary model-bench \
		    --model "random-$name" --quant "$quant" --scenario "$1" --ctx "$2" --peer "$3" ||
			{ echo "abba $sc $name $quant: failed (log $OUT/arch-abba-$sc-$name-$quant.log)"; ok=1; }
	done
	if [ "${GPU_ARCH_PROF:-0}" = 1 ]; then
		pf=$OUT/arch-prof-$name-$quant.txt
		if timeout 200 build/t/tools/model-bench -P -d "${GPU_ARCH_DEVICE:-cuda}" -c 512 -n 16 \
		    -r 1 -k 0 "$f" >"$pf" 2>&1; then
			for w in decode verify-K3 prefill; do
				echo "== $name $quant: prof $w (costliest kernels, us a step)"
				grep "^prof	$w	" "$pf" | head -8 | cut -f3,5,7,9 | tr -s '\t' ' '
			done
		else
			echo "== $name $quant: model-bench -P failed: $(tail -n 1 "$pf")"; ok=1
		fi
	fi
	[ "${GPU_ARCH_KEEP:-0}" = 1 ] || rm -f "$f"
done
exit $ok
