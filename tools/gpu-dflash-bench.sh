#!/bin/sh
# gpu-dflash-bench.sh TRUNK DRAFTER [OUTDIR]: issue 31's benchmark: where a
# DFlash / DFlash2 block drafter's speculative decoding beats the trunk's
# MTP head's, on TRUNK (e.g. gguf-random -p 27b -t NVFP4, which has an MTP
# layer) with DRAFTER (a drafter of the published shape, random weights:
# the speed does not depend on them; a directory, file or hf: spec, as
# run-spec --dspark-draft), on the device (DEVICE: cuda where nvidia-smi
# lists a GPU, else cpu; the CPU at tiny shapes for the tests).
#
# costs  build/t/tools/model-bench -D DRAFTER -k 15 -G device on TRUNK
#        (costs.log): one drafter forward (dflash-draft), the block-row
#        verify as spec's round runs it (dflash-verify, K = block - 1), a
#        block of the drafter's context (dflash-context) and the plain
#        verifies of K = 1..15 rows (verify), each against one decode step;
#        their receipt rows in costs.tsv (ms, the decode step's ms the peer,
#        the ratio x-decode-step; the decode step's tok/s as decode-b1).
# mtp    tools/spec-replay-bench.sh with KS=$MTP_K (default 3; 0 skips it):
#        model A's acceptance trace of K=MTP_K (MTP_TRACE, recorded before,
#        else recorded on A there: PROMPTS, N, RECORD_ARGS apply) replayed
#        on TRUNK's MTP head against plain decoding, A B B A; its rows in
#        replay.tsv (scenario spec-replay-kK), its summary summary-mtp.tsv.
# dflash For each L in LS (default 3 4 5 6): a synthetic trace of K =
#        block - 1 whose rounds keep L tokens on average
#        (build/t/tools/spec-trace-synth: acceptance alpha at every depth,
#        solved from L; PROMPTS prompts (default 16) of PLEN tokens (a
#        list, default 128), N new tokens each (default 128), SEED 1),
#        trace-dflash-lL.jsonl; then tools/abba A B B A of A = plain
#        decoding of its prompts on TRUNK alone (run-spec --trace-arm
#        plain --dspark-spec 0: no drafter armed, so no layer kept for one)
#        against B = the replay with DRAFTER armed (--trace-arm replay
#        --dspark-spec 1: its real drafter forwards and block verifies,
#        each round keeping what the trace says, the real rollback); rows
#        in replay.tsv (scenario dflash-replay-bB-lL, peer plain-decode),
#        the summary line in summary-dflash.tsv.
# PARTS (default "costs mtp dflash") runs some of them: a call of 10
# minutes on the device may not hold all of them for the 27B shape (split
# LS over calls too); the summary reads what OUTDIR has.
#
# The summary (summary.tsv, printed): a line an arm, drafter (mtp-kK,
# dflash-lL), plain and speculative tok/s (medians), the ratio, and from
# the replay mean_len (tokens a round), accepted, drafted, rounds, agree;
# then from the costs a round of the block drafter in decode steps (R =
# dflash-draft + dflash-verify, x_step) and each L's ratio the costs
# predict (L / R, the drafter's context and the host's work aside), and
# the verdict: the L's where DFlash beats MTP K's measured ratio and the
# tokens a round where it would break even (MTP's ratio times R, from the
# costs; and between the replays' mean_len where their ratios cross it).
# A trace's mean_len is a little under its L: the rounds cut short by N
# (spec-trace-synth's header).
#
# Environment: DEVICE, LS, PROMPTS, PLEN, N, SEED, BLOCKS (A B B A blocks,
# default 1), CTX and STEPS (model-bench's -c, default 128, and -n,
# default 32), BENCH_ARGS (more model-bench options, e.g. '-t 2'),
# RUN_SPEC_ARGS (more run-spec options for TRUNK's runs, e.g. '-t 2'),
# MTP_K, MTP_TRACE, RECORD_ARGS, A (model A's folder), MODEL_NAME and QUANT
# (the rows' model and quant; default TRUNK's name and -), MEMRA_COMMIT
# (the rows' commit; default the checkout's).  MEMRA_DSPARK_SPEC and
# MEMRA_DSPARK_DRAFT are ignored: each run names its drafter.  Receipts
# are copied into bench/YYYY-MM-DD/ by hand (bench/README.md).
set -eu
prog=gpu-dflash-bench.sh
die() { echo "$prog: $1" >&2; exit "${2:-1}"; }
[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: $prog TRUNK DRAFTER [OUTDIR]" 2
trunk=$1 drafter=$2
[ -e "$trunk" ] || die "$trunk: no such file"
case $drafter in
hf:*) ;;
*) [ -e "$drafter" ] || die "$drafter: no such file or directory" ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/spec-replay.sh
. "$top/tools/spec-replay.sh"
rs=$top/bin/run-spec mb=$top/build/t/tools/model-bench synth=$top/build/t/tools/spec-trace-synth
for x in "$rs" "$mb" "$synth"; do
	[ -x "$x" ] || die "$x: not built (make all units)"
done
out=${3:-$(mktemp -d)}
mkdir -p "$out"
unset MEMRA_DSPARK_SPEC MEMRA_DSPARK_DRAFT
dev=${DEVICE:-}
if [ -z "$dev" ]; then
	dev=cpu
	nvidia-smi -L >/dev/null 2>&1 && dev=cuda
fi
name=${MODEL_NAME:-$(basename "$trunk")} quant=${QUANT:--}
MEMRA_COMMIT=${MEMRA_COMMIT:-$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo -)}
export MEMRA_COMMIT
parts=" ${PARTS:-costs mtp dflash} "
mk=${MTP_K:-3}
cols='date	commit	gpu	binary	model	quant	scenario	ctx	n	median	min	max	unit	peer	peer_median	ratio	log	command'

# cost_rows LOG CMD: costs.tsv's rows from model-bench's LOG.
cost_rows() {
	awk -F'\t' -v OFS='\t' -v date="$(date -u +%F)" -v commit="$MEMRA_COMMIT" \
	    -v gpu="$(receipt_gpu)" -v model="$name" -v quant="$quant" -v cmd="$2" '
	function row(scen, ctx, n, med, lo, hi, unit, peer, pm, r) {
		print date, commit, gpu, "model-bench", model, quant, scen, ctx, n, med, lo, hi,
		    unit, peer, pm, r, "costs.log", cmd
	}
	$1 == "decode" { t = $9 + 0; lo = lo == "" || t < lo ? t : lo; hi = t > hi ? t : hi }
	$1 == "decode-median" { ctx = $3; step = 1000 / $9
		row("decode-b1", ctx, $7, $9, lo, hi, "tok/s", "-", "-", "-") }
	$1 == "verify" { row("verify-k" $3, ctx, 5, $7, $11, $13, "ms", "decode-step", step, $9) }
	$1 == "dflash-draft" { row("dflash-draft-b" $3, $5, 5, $7, $9, $11, "ms", "decode-step",
	    step, $13) }
	$1 == "dflash-verify" { row("dflash-verify-k" $3, ctx, 5, $7, $9, $11, "ms",
	    "decode-step", step, $13) }
	$1 == "dflash-context" { row("dflash-context-b" $3, ctx, 5, $5, $7, $9, "ms",
	    "decode-step", step, $11) }' "$1"
}

if [ "${parts#* costs }" != "$parts" ]; then
	echo "== costs: a drafter forward, a block verify, against a decode step (model-bench -D)"
	cmd="$mb -d $dev -G device -c ${CTX:-128} -n ${STEPS:-32} -r 3 -k 15 -D $drafter ${BENCH_ARGS:-} $trunk"
	# shellcheck disable=SC2086
	"$mb" -d "$dev" -G device -c "${CTX:-128}" -n "${STEPS:-32}" -r 3 -k 15 -D "$drafter" \
	    ${BENCH_ARGS:-} "$trunk" >"$out/costs.log" 2>&1 ||
	    { tail -5 "$out/costs.log" >&2; die "model-bench failed (costs.log)"; }
	{ echo "$cols"; cost_rows "$out/costs.log" "$cmd"; } >"$out/costs.tsv"
	grep -E '^(decode-median|dflash-)' "$out/costs.log"
fi
block=$(awk -F'\t' '$1 == "dflash-draft" { print $3 }' "$out/costs.log" 2>/dev/null || true)
[ -n "$block" ] || die "no drafter block in $out/costs.log: run PARTS=costs first"
K=$((block - 1))

if [ "${parts#* mtp }" != "$parts" ] && [ "$mk" -gt 0 ]; then
	echo "== MTP K=$mk: model A's trace replayed on $name (tools/spec-replay-bench.sh)"
	TRACE=${MTP_TRACE:-} KS=$mk MODEL_NAME=$name QUANT=$quant \
	    RUN_SPEC_ARGS="--device $dev ${RUN_SPEC_ARGS:-}" \
	    sh "$top/tools/spec-replay-bench.sh" "$trunk" "$out" >"$out/mtp.txt" 2>&1 ||
	    { cat "$out/mtp.txt" >&2; die "MTP K=$mk: spec-replay-bench.sh failed (mtp.txt)"; }
	awk -F'\t' -v OFS='\t' 'NR > 1 { $1 = "mtp-k" $1; print }' "$out/summary.tsv" \
	    >"$out/summary-mtp.tsv"
	rm -f "$out/summary.tsv"
	cat "$out/summary-mtp.tsv"
fi

if [ "${parts#* dflash }" != "$parts" ]; then
	for L in ${LS:-3 4 5 6}; do
		echo "== DFlash block $block, L=$L: plain decode (A) vs the replay (B) on $name"
		t=$out/trace-dflash-l$L.jsonl
		"$synth" -K "$K" -L "$L" -p "${PROMPTS:-16}" -l "${PLEN:-128}" -n "${N:-128}" \
		    -s "${SEED:-1}" "$t" 2>>"$out/synth.log" || die "spec-trace-synth -L $L failed"
		run="'$rs' --trace-in '$t' --device $dev ${RUN_SPEC_ARGS:-}"
		row=$(replay_abba "$out" "dflash-l$L" "$run --trace-arm plain --dspark-spec 0 '$trunk'" \
		    "$run --trace-arm replay --dspark-spec 1 --dspark-draft '$drafter' '$trunk'" \
		    "$name" "$quant" "dflash-replay-b$block-l$L") || die "L=$L: abba failed"
		touch "$out/summary-dflash.tsv"
		awk -F'\t' -v l="dflash-l$L" '$1 != l' "$out/summary-dflash.tsv" >"$out/summary-dflash.tmp"
		printf 'dflash-l%s\t%s\n' "$L" "$row" >>"$out/summary-dflash.tmp"
		mv "$out/summary-dflash.tmp" "$out/summary-dflash.tsv"
		tail -1 "$out/summary-dflash.tsv"
	done
fi

# --- the summary, from what OUTDIR has ---
{
	printf 'drafter\tplain_tok_s\tspec_tok_s\tratio\tmean_len\taccepted\tdrafted\trounds\tagree\n'
	cat "$out/summary-mtp.tsv" "$out/summary-dflash.tsv" 2>/dev/null || true
} >"$out/summary.tsv"
cat "$out/summary.tsv"
awk -F'\t' -v block="$block" '
    FILENAME ~ /costs.log$/ && $1 == "dflash-draft" { d = $13 }
    FILENAME ~ /costs.log$/ && $1 == "dflash-verify" { v = $13 }
    FILENAME ~ /summary.tsv$/ && $1 ~ /^mtp-k/ { mtp = $4; mname = $1 }
    FILENAME ~ /summary.tsv$/ && $1 ~ /^dflash-l/ { n++; l[n] = substr($1, 9); r[n] = $4; m[n] = $5 }
    END {
	R = d + v
	printf "costs: a DFlash round (block %d) = drafter forward %.3f + verify %.3f = %.3f decode steps\n",
	    block, d, v, R
	for (i = 1; i <= n; i++)
		printf "dflash L=%s: %.3fx plain decode (mean_len %s; the costs predict %.3fx)\n",
		    l[i], r[i], m[i], m[i] / R
	if (mtp == "") { print "no MTP arm: nothing to compare with"; exit }
	printf "%s: %.3fx plain decode; from the costs DFlash breaks even at mean_len %.2f\n",
	    mname, mtp, mtp * R
	w = ""; cross = ""
	for (i = 1; i <= n; i++) {
		if (r[i] > mtp)
			w = w (w == "" ? "" : ", ") "L=" l[i]
		if (i > 1 && cross == "" && r[i - 1] <= mtp && r[i] > mtp)
			cross = m[i - 1] + (m[i] - m[i - 1]) * (mtp - r[i - 1]) / (r[i] - r[i - 1])
	}
	if (w == "")
		printf "DFlash wins at none of the L replayed\n"
	else if (cross == "")
		printf "DFlash wins at %s\n", w
	else
		printf "DFlash wins at %s (the measured ratios cross %s'"'"'s at mean_len %.2f)\n",
		    w, mname, cross
    }' "$out/costs.log" "$out/summary.tsv" >"$out/verdict.txt"
cat "$out/verdict.txt"
echo "($out)"
