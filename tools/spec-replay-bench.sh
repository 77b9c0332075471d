#!/bin/sh
# spec-replay-bench.sh FILE [OUTDIR]: end-to-end speculative decoding by
# draft depth K on FILE (a random-weight GGUF of a real shape, e.g.
# gguf-random -p 27b -t NVFP4) with model A's acceptance, against plain
# decoding of the same lengths.
#
# 1. run-spec records A's acceptance traces (--trace-out): K = $KS over the
#    first $PROMPTS of A's prompts, $N new tokens each, raw, --ignore-eos;
#    the recording must PASS (identical to plain decode).
# 2. For each K, tools/abba runs A = plain decode (run-spec --trace-in TRACE
#    --trace-arm plain -K k FILE) and B = the replay (--trace-arm replay):
#    A B B A, $BLOCKS blocks.  The replay prefills prompts of the recorded
#    lengths and runs each recorded round's real drafts and K+1-row verify,
#    keeping the drafts A's round kept (and the verify's pick after them),
#    with the real rollback; plain decode makes as many tokens a prompt.
#
# OUTDIR (default: a new temporary folder) gets trace-A.jsonl and
# record.log (the recording), replay.tsv (one receipt row a K, DESIGN.md's
# columns: the replay's tok/s, plain decode's as the peer, the ratio
# replay / plain), replay-kK.log (each K's raw runs), abba-kK.txt and
# summary.tsv (K, the two medians, the ratio, the tokens a verify round and
# the acceptance from the replay's row, and its rounds' agreement with the
# judge), printed at the end with the K that wins.  Receipts are copied
# into bench/YYYY-MM-DD/ by hand (bench/README.md).
#
# CALIBRATE=1 first checks the replay against the real thing on A itself:
# for each K, A = run-spec's own speculative decoding of the prompts (its K
# line's tok/s), B = the replay of its trace on A (which keeps the very
# same tokens), A B B A into calib.tsv, calib-kK.txt and calib-kK.log: the
# ratio should be 1 within the noise.
#
# Environment: A (model A's folder; default models/A, else ../shared/models/A
# beside the checkout), TRACE (a trace recorded before: step 1 is skipped),
# KS (K or LO-HI, default 1-8), PROMPTS (64), N (64), BLOCKS (1),
# RUN_SPEC_ARGS (more run-spec options for FILE's runs, e.g. '--device cuda'
# or '-t 1'), RECORD_ARGS (for the recording, e.g. '-t 2'), MODEL_NAME and
# QUANT (the rows' model and quant; default FILE's name and -).  MEMRA_COMMIT
# names the commit in the rows (tools/abba).  On a device, a call of 10
# minutes holds a few K of the 27B shape: split KS over calls with TRACE set.
set -eu
prog=spec-replay-bench.sh
die() { echo "$prog: $1" >&2; exit "${2:-1}"; }
[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $prog FILE [OUTDIR]" 2
f=$1
[ -e "$f" ] || die "$f: no such file"
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/spec-replay.sh
. "$top/tools/spec-replay.sh"
rs=$top/bin/run-spec
[ -x "$rs" ] || die "$rs: not built (make)"
out=${2:-$(mktemp -d)}
mkdir -p "$out"
ks=${KS:-1-8}
case $ks in
*-*) lo=${ks%-*} hi=${ks#*-} ;;
*) lo=$ks hi=$ks ;;
esac
name=${MODEL_NAME:-$(basename "$f")}
trace=${TRACE:-}
a=${A:-}
for d in "$top/models/A" "$top/../shared/models/A"; do
	[ -z "$a" ] && [ -f "$d/config.json" ] && a=$d
done
if [ -z "$trace" ] || [ "${CALIBRATE:-0}" = 1 ]; then
	[ -n "$a" ] && [ -f "$a/prompts.jsonl" ] || die "model A not found (set A)"
	head -n "${PROMPTS:-64}" "$a/prompts.jsonl" >"$out/prompts.jsonl"
fi
rec="'$rs' --raw --jsonl --ignore-eos -n ${N:-64} ${RECORD_ARGS:-}"
if [ -z "$trace" ]; then
	trace=$out/trace-A.jsonl
	echo "== recording A's traces, K=$ks, ${PROMPTS:-64} prompts, ${N:-64} tokens each"
	sh -c "$rec -K '$ks' --trace-out '$trace' '$a'" <"$out/prompts.jsonl" >"$out/record.log" 2>&1 ||
	    { tail -5 "$out/record.log"; die "recording failed (record.log)"; }
	grep -q '^SELF-CONSISTENCY PASS$' "$out/record.log" || die "recording did not pass"
	grep '^K=' "$out/record.log"
fi
k=$lo
while [ "${CALIBRATE:-0}" = 1 ] && [ "$k" -le "$hi" ]; do
	echo "== K=$k on A: run-spec's speculative decoding (A) vs the replay of its trace (B)"
	python3 "$top/tools/abba" -a "$rec -K $k --trace-out '$out/calib-k$k.jsonl' '$a' <'$out/prompts.jsonl'" \
	    -b "'$rs' --trace-in '$out/calib-k$k.jsonl' --trace-arm replay ${RECORD_ARGS:-} '$a'" \
	    -r '(?m)^(?:K=[0-9]+ |replay\t[0-9]+\t)([0-9.]+)' --unit tok/s --blocks "${BLOCKS:-1}" \
	    --tsv "$out/calib.tsv" --log "$out/calib-k$k.log" --binary run-spec --model fixture-A \
	    --quant - --scenario "spec-replay-calib-k$k" --peer run-spec-real >"$out/calib-k$k.txt" \
	    2>&1 || { cat "$out/calib-k$k.txt"; die "K=$k: calibration failed"; }
	grep -E '^(A|B|ratio)' "$out/calib-k$k.txt"
	k=$((k + 1))
done
printf 'K\tplain_tok_s\treplay_tok_s\tratio\tmean_len\taccepted\tdrafted\trounds\tagree\n' \
    >"$out/summary.tsv"
k=$lo
while [ "$k" -le "$hi" ]; do
	echo "== K=$k: plain decode (A) vs replay (B) on $name"
	cmd="'$rs' --trace-in '$trace' -K $k ${RUN_SPEC_ARGS:-} '$f'"
	row=$(replay_abba "$out" "k$k" "$cmd --trace-arm plain" "$cmd --trace-arm replay" "$name" \
	    "${QUANT:--}" "spec-replay-k$k") || die "K=$k: abba failed"
	printf '%s\t%s\n' "$k" "$row" >>"$out/summary.tsv"
	k=$((k + 1))
done
cat "$out/summary.tsv"
awk -F'\t' 'NR > 1 && (best == "" || $4 > r) { best = $1; r = $4 }
    END { if (best != "") printf "best K=%s: %.3fx plain decode\n", best, r }' "$out/summary.tsv"
echo "($out)"
