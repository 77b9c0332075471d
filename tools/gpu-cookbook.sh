#!/bin/sh
# gpu-cookbook.sh [OUTDIR]: the cookbook's long-context serving block (RTX PRO 6000,
# 96 GB: "full 262K context, 32 sessions, 16 GB prefix cache") booted unchanged on a
# random-weight file of its model's published shape: issue 23's "boots on the
# 27B-shape file and says what each session costs, or refuses with the largest
# setting that fits".
#
# The files (made once under ${TMPDIR:-/tmp}/memra-gguf, kept): gguf-random -p 27b
# -t NVFP4 (Qwen3.8-27B as its NVFP4 serving GGUF lays it out, Q5_K embedding and
# head, the MTP block at blk.64: the block's Qwen3.8-27B-NVFP4-Q5K-mtp.gguf) and
# trim-head's external MTP draft of it with the head trimmed to 32768 rows (the
# block's mtp-Qwen3.8-27B-NVFP4-frspec-sxc32768.gguf; ranks 0..32767, as a random
# file has no measured ones).  The block's variables as the cookbook writes them
# (MEMRA_COMPAT=openai, MEMRA_MODELS, MEMRA_MTP_DRAFT, MEMRA_CTX=262144,
# MEMRA_MAX_SESSIONS=32, MEMRA_PREFIX_CACHE_MB=16384, started as memra-server), the
# paths substituted; MEMRA_HOST, MEMRA_PORT=0 and MEMRA_DEVICE added.
#
# It boots: its boot lines ([model], [sched] ...: what each session costs, how many
# fit), then one completion.  It refuses: the refusal must name what fits ("at most
# N sessions of ctx C", or "S of ctx X"; for the prefix cache, "the sessions leave M
# MiB"); the block boots again with the largest it named (MEMRA_MAX_SESSIONS=N, else
# MEMRA_CTX=X; MEMRA_PREFIX_CACHE_MB=M), at most three boots, and serves one
# completion, so that the named setting is shown to work.  The completion: a prompt
# of 512 token ids, 64 new tokens (ignore_eos), greedy, by /v1/completions; its wall
# time and usage are printed (information: one request, not a benchmark).
#
# OUTDIR (default: a new temporary folder) gets boot-N.log of each boot,
# reply-N.json and cookbook.log (the verdicts); exit 0 when a setting booted and
# served its completion, and a refusal named what fits.
# Environment: COOKBOOK_SHAPE (27b) and COOKBOOK_TYPE (NVFP4): the file;
# COOKBOOK_DEVICE (cuda); COOKBOOK_CTX, COOKBOOK_SESSIONS, COOKBOOK_PREFIX_MB: other
# values than the block's (for a test on a small shape); COOKBOOK_TRIM (32768).
# Needs bin/serve, bin/trim-head, bin/gguf-inspect, build/t/tools/gguf-random, curl.
set -u
prog=gpu-cookbook.sh
cd "$(dirname "$0")/.." || exit 2
OUT=${1:-$(mktemp -d)}
mkdir -p "$OUT" || exit 2
. tools/peer-scen.sh
shape=${COOKBOOK_SHAPE:-27b} q=${COOKBOOK_TYPE:-NVFP4} dev=${COOKBOOK_DEVICE:-cuda}
ctx=${COOKBOOK_CTX:-262144} ns=${COOKBOOK_SESSIONS:-32} pmb=${COOKBOOK_PREFIX_MB:-16384}
trim=${COOKBOOK_TRIM:-32768}
for b in bin/serve bin/trim-head bin/gguf-inspect build/t/tools/gguf-random; do
	[ -x "$b" ] || { echo "$prog: $b: not built (make)" >&2; exit 2; }
done
random_gguf "$shape" "$q" || { echo "$prog: gguf-random -p $shape -t $q: failed" >&2; exit 1; }
d=${f%.gguf}-frspec-sxc$trim.gguf
[ "$trim" -le "$vocab" ] || { echo "$prog: trim $trim: past the vocabulary ($vocab)" >&2; exit 2; }
if [ ! -e "$d" ]; then
	seq 0 $((trim - 1)) >"$OUT/ranks.txt"
	bin/trim-head "$f" "$OUT/ranks.txt" "$d.tmp" >"$OUT/trim-head.log" 2>&1 && mv "$d.tmp" "$d" ||
		{ echo "$prog: trim-head: failed (see $OUT/trim-head.log)" >&2; rm -f "$d.tmp"; exit 1; }
fi
ln -sf "$PWD/bin/serve" "$OUT/memra-server"

spid=
stop() { [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null; spid=; return 0; }
trap 'stop' EXIT
trap 'stop; exit 1' INT TERM HUP

# boot N SESSIONS CTX: the block started; 0 listening (url set), 1 it exited (its log in boot-N.log)
boot() {
	log=$OUT/boot-$1.log
	env MEMRA_COMPAT=openai MEMRA_MODELS="q38=$f" MEMRA_MTP_DRAFT="$d" MEMRA_CTX="$3" \
	    MEMRA_MAX_SESSIONS="$2" MEMRA_PREFIX_CACHE_MB="$pmb" \
	    MEMRA_HOST=127.0.0.1 MEMRA_PORT=0 MEMRA_DEVICE="$dev" "$OUT/memra-server" 2>"$log" &
	spid=$!
	while :; do
		grep -q 'listening on' "$log" && break
		kill -0 "$spid" 2>/dev/null || { wait "$spid" 2>/dev/null; spid=; return 1; }
		sleep 0.5
	done
	url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log")
	[ -n "$url" ]
}

# reply N: one completion of 512 ids (64 new), its wall time and usage; 0 when it has 64 tokens
reply() {
	ids=$(awk -v v="$vocab" 'BEGIN { s = 7; for (i = 0; i < 512; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%s%d", i ? "," : "", 1 + s % (v - 1) } }')
	t0=$(date +%s.%N)
	curl -s -o "$OUT/reply-$1.json" -w '%{http_code}' "$url/v1/completions" \
	    -H 'Content-Type: application/json' -d "{\"model\": \"q38\", \"prompt\": [$ids],
	    \"max_tokens\": 64, \"temperature\": 0, \"ignore_eos\": true}" >"$OUT/reply-$1.code"
	t1=$(date +%s.%N)
	n=$(sed -n 's/.*"completion_tokens": *\([0-9]*\).*/\1/p' "$OUT/reply-$1.json")
	echo "completion: HTTP $(cat "$OUT/reply-$1.code"), $n tokens of 64 in" \
	    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s (one request, 512 ids in)"
	[ "$(cat "$OUT/reply-$1.code")" = 200 ] && [ "${n:-0}" = 64 ]
}

ok=1
{
	echo "== the cookbook's long-context block on $shape $q ($dev): MEMRA_CTX=$ctx" \
	    "MEMRA_MAX_SESSIONS=$ns MEMRA_PREFIX_CACHE_MB=$pmb, MTP draft trimmed to $trim rows"
	for i in 1 2 3; do
		if boot $i "$ns" "$ctx"; then
			grep '^\[' "$log"
			reply $i && ok=0
			break
		fi
		grep '^\[' "$log" | tail -8
		why=$(grep -v '^\[' "$log" | tail -1)
		echo "refused: $why"
		most=$(echo "$why" | sed -n 's/.*: at most \([0-9]*\) sessions of ctx [0-9]*.*/\1/p')
		octx=$(echo "$why" | sed -n "s/.*, or $ns of ctx \\([0-9]*\\).*/\\1/p")
		left=$(echo "$why" | sed -n 's/.*the sessions leave \([0-9]*\) MiB.*/\1/p')
		if [ -n "$most" ] && [ "$most" -ge 1 ]; then
			ns=$most
		elif [ -n "$octx" ]; then
			ctx=$octx
		elif [ -n "$left" ] && [ "$left" -ge 1 ] && [ "$left" -lt "$pmb" ]; then
			pmb=$left
		else
			echo "the refusal names no setting that fits"
			break
		fi
		echo "== again with the largest it named: MEMRA_MAX_SESSIONS=$ns MEMRA_CTX=$ctx" \
		    "MEMRA_PREFIX_CACHE_MB=$pmb"
	done
	stop
	[ $ok = 0 ] && echo "COOKBOOK BOOT PASS" || echo "COOKBOOK BOOT FAIL"
} 2>&1 | tee "$OUT/cookbook.log"
grep -q '^COOKBOOK BOOT PASS' "$OUT/cookbook.log"
