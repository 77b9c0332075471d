#!/bin/sh
# gpu-cookbook.sh [OUTDIR]: the cookbook's serving blocks booted unchanged on
# random-weight files of their models' published shapes (t/tools/gguf-random), with
# their proof lines, each serving one completion.
#
# Blocks (COOKBOOK_BLOCKS, default "long ornith ornith-ranks dflash gemma"):
#   long          Qwen3.8-27B, RTX PRO 6000 96 GB long-context serving ("full 262K
#                 context, 32 sessions, 16 GB prefix cache"): MEMRA_MODELS=q38=TRUNK,
#                 MEMRA_MTP_DRAFT=DRAFT, MEMRA_CTX=262144, MEMRA_MAX_SESSIONS=32,
#                 MEMRA_PREFIX_CACHE_MB=16384 (issue 23: it boots and says what each
#                 session costs, or refuses with the largest setting that fits).
#                 TRUNK: gguf-random -p 27b -t NVFP4 (its NVFP4 serving GGUF's layout,
#                 Q5_K embedding and head, the MTP block at blk.64: the block's
#                 Qwen3.8-27B-NVFP4-Q5K-mtp.gguf).  Proof: [worker] q38: regime draft
#                 attached (...).
#   ornith        Ornith-1.5-35B-A3B, "trunk + masked head": MEMRA_MODELS=
#                 "ornith=TRUNK+DRAFT" (issue 27).  TRUNK: gguf-random -p 35b-a3b -t
#                 NVFP4 (the Q5K-mtp file).  Proof: [worker] ornith: regime draft
#                 attached (...owngen32768.gguf).
#   ornith-ranks  its "ranks-only alternative": MEMRA_FRSPEC_TRIM=RANKS,
#                 MEMRA_MODELS=ornith=TRUNK.  Proof: [frspec-trim] self-trimmed head:
#                 32768 rows of main output.weight.
#   dflash        Qwen3.8-27B, "RTX PRO 6000 Blackwell: DFlash2 drafter": MEMRA_MODELS=
#                 q38=TRUNK (long's), MEMRA_DSPARK_SPEC=1, MEMRA_DSPARK_DRAFT=DRAFTER
#                 (gguf-random -p dflash2-27b: Qwen3.8-27B-DFlash2's published shape,
#                 BF16, for the block's hf: spec), MEMRA_FRSPEC_TRIM=RANKS (long's),
#                 MEMRA_CTX=262144, MEMRA_MAX_SESSIONS=32, MEMRA_PREFIX_CACHE_MB=16384
#                 (issue 31).  Proofs: the [dspark] lines (arming disables MTP spec,
#                 the drafter's shape, TRIMMED to 32768 rows, precision q4, the route:
#                 [model] q38: ... K=7 (DFlash2 ...)).  Beyond the one completion: greedy
#                 replies to 4 id prompts sent at once, with K by load and again with
#                 MEMRA_SPEC_K=7 (rounds drafted, from /metrics), equal a plain server's
#                 (MEMRA_SPEC_K=0, no drafter) at the setting that booted.
#   gemma         Gemma-4 31B, "RTX PRO 6000 Blackwell: serving with vision +
#                 drafter": MEMRA_MODELS=gemma31=GTRUNK, MEMRA_DRAFT=ASST,
#                 MEMRA_GEMMA_DRAFT_RANKS=GRANKS, MEMRA_GEMMA_TRIM_ADAPT=512,
#                 MEMRA_GEMMA_VISION=1, MEMRA_GEMMA_MMPROJ=MMPROJ, MEMRA_CTX=262144,
#                 MEMRA_MAX_SESSIONS=16, MEMRA_PREFIX_CACHE_MB=16384 (issues 28, 32).
#                 GTRUNK: gguf-random -p 31b -t Q6_K (the block's
#                 gemma-4-31B-it-Q6_K.gguf); ASST: gguf-random -p 31b-assistant -t
#                 NVFP4 (the official NVFP4 MTP drafter, gemma4_assistant, as memra's
#                 plan lays out one); MMPROJ: gguf-random -p 31b-mmproj (BF16);
#                 GRANKS: the first COOKBOOK_TRIM ids in OUTDIR, named as the
#                 cookbook's (gemma31b-ranks-32768.gguf.txt; the drain writes the
#                 learned slots beside it, .learned).  Proofs: [gemma-draft] assistant
#                 drafter: 4 layers, hidden 1024 over the trunk's K/V, head trimmed
#                 to 32768 rows (...); [gemma-draft] trim adapt: 512 learned slots
#                 after the 32768 ranks; [model] gemma31: ctx=C K=N (assistant
#                 speculative decode ...); [vision] gemma4 tower: 27 layers, hidden
#                 1152, ... and [vision] images in chat messages ....  Beyond the
#                 completion: one chat completion of an image (t/data/gemma4/
#                 g4-vision/images/a.png, as a data: URI) and a question, answered
#                 (information: one request), and the rounds the assistant drafted
#                 (/metrics; information: K goes by load).
# Every block also sets MEMRA_COMPAT=openai and starts memra-server, as written.
# DRAFT: trim-head's external MTP draft of TRUNK, its head trimmed to the first
# COOKBOOK_TRIM (32768) ids (named as the cookbook's: ...-frspec-sxc32768.gguf for
# the 27B, ...-frspec-owngen32768.gguf for Ornith; a random file has no measured
# ranks, so the ids are 0..N-1); RANKS: those ids, one a line.  Files are made once
# under ${TMPDIR:-/tmp}/memra-gguf and kept (all five blocks' at the published
# shapes: 66 GB; the gemma block's 26.7 of them).  Added to each block: MEMRA_HOST,
# MEMRA_PORT=0, MEMRA_DEVICE.
#
# A block that boots: its boot lines ([model], [sched] ...: what each session costs,
# how many fit), its proof line checked, then one completion.  One that refuses: the
# refusal must name what fits ("at most N sessions of ctx C", or "S of ctx X"; for
# the prefix cache, "the sessions leave M MiB"); the block boots again with the
# largest it named (MEMRA_MAX_SESSIONS=N, else MEMRA_CTX=X; MEMRA_PREFIX_CACHE_MB=M),
# at most three boots, so the named setting is shown to work.  The completion: a
# prompt of 512 token ids, 64 new tokens (ignore_eos), greedy, by /v1/completions;
# its wall time is printed (information: one request, not a benchmark).
#
# OUTDIR (default: a new temporary folder) gets BLOCK-boot-N.log of each boot,
# BLOCK-reply.json and cookbook.log (the verdicts); exit 0 when every block booted
# with its proof line and served its completion.
# Environment: COOKBOOK_DEVICE (cuda); COOKBOOK_TYPE (NVFP4) and COOKBOOK_SHAPE_27B
# (27b), COOKBOOK_SHAPE_ORNITH (35b-a3b), COOKBOOK_SHAPE_DFLASH (dflash2-27b),
# COOKBOOK_TYPE_GEMMA (Q6_K) and COOKBOOK_SHAPE_GEMMA (31b),
# COOKBOOK_SHAPE_GEMMA_ASST (31b-assistant), COOKBOOK_SHAPE_GEMMA_MMPROJ
# (31b-mmproj): the files (small shapes for a test);
# COOKBOOK_CTX, COOKBOOK_SESSIONS, COOKBOOK_PREFIX_MB: other values than the long
# block's; COOKBOOK_TRIM (32768).
# Needs bin/serve, bin/trim-head, bin/gguf-inspect, build/t/tools/gguf-random, curl,
# python3.
set -u
prog=gpu-cookbook.sh
cd "$(dirname "$0")/.." || exit 2
OUT=${1:-$(mktemp -d)}
mkdir -p "$OUT" || exit 2
. tools/peer-scen.sh
blocks=${COOKBOOK_BLOCKS:-long ornith ornith-ranks dflash gemma}
q=${COOKBOOK_TYPE:-NVFP4} dev=${COOKBOOK_DEVICE:-cuda} trim=${COOKBOOK_TRIM:-32768}
for b in bin/serve bin/trim-head bin/gguf-inspect build/t/tools/gguf-random; do
	[ -x "$b" ] || { echo "$prog: $b: not built (make)" >&2; exit 2; }
done
for b in $blocks; do
	case $b in
	long | ornith | ornith-ranks | dflash | gemma) ;;
	*) echo "$prog: block '$b': not long, ornith, ornith-ranks, dflash or gemma" >&2; exit 2 ;;
	esac
done

# files SHAPE TAG: the trunk (f), its vocabulary (vocab), the ranks (ranks) and the
# trimmed draft (d, named ...-frspec-TAG$trim.gguf)
files() {
	random_gguf "$1" "$q" || { echo "$prog: gguf-random -p $1 -t $q: failed" >&2; exit 1; }
	[ "$trim" -le "$vocab" ] || { echo "$prog: trim $trim: past the vocabulary ($vocab)" >&2; exit 2; }
	ranks=${f%.gguf}-ranks-$2-$trim.txt d=${f%.gguf}-frspec-$2$trim.gguf
	[ -e "$ranks" ] || { seq 0 $((trim - 1)) >"$ranks.tmp" && mv "$ranks.tmp" "$ranks"; } || exit 1
	[ -e "$d" ] && return 0
	bin/trim-head "$f" "$ranks" "$d.tmp" >"$OUT/trim-head-$2.log" 2>&1 && mv "$d.tmp" "$d" ||
		{ echo "$prog: trim-head $f: failed (see $OUT/trim-head-$2.log)" >&2; rm -f "$d.tmp"; exit 1; }
}

# made FILE ARG...: gguf-random ARG... FILE, made once and kept
made() {
	mf=$1
	shift
	[ -e "$mf" ] && return 0
	build/t/tools/gguf-random "$@" "$mf.tmp" >/dev/null && mv "$mf.tmp" "$mf" ||
		{ echo "$prog: gguf-random $*: failed" >&2; rm -f "$mf.tmp"; exit 1; }
}

ln -sf "$PWD/bin/serve" "$OUT/memra-server"
spid=
stop() { [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null; spid=; return 0; }
trap 'stop' EXIT
trap 'stop; exit 1' INT TERM HUP

# boot LOG VAR=VALUE...: the block started; 0 listening (url set), 1 it exited
boot() {
	log=$1
	shift
	: >"$log"
	env "$@" MEMRA_COMPAT=openai MEMRA_HOST=127.0.0.1 MEMRA_PORT=0 MEMRA_DEVICE="$dev" \
	    "$OUT/memra-server" 2>"$log" &
	spid=$!
	while :; do
		grep -q 'listening on' "$log" && break
		kill -0 "$spid" 2>/dev/null || { wait "$spid" 2>/dev/null; spid=; return 1; }
		sleep 0.5
	done
	url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log")
	[ -n "$url" ]
}

# reply BLOCK MODEL: one completion of 512 ids (64 new); 0 when it has 64 tokens
reply() {
	ids=$(awk -v v="$vocab" 'BEGIN { s = 7; for (i = 0; i < 512; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%s%d", i ? "," : "", 1 + s % (v - 1) } }')
	t0=$(date +%s.%N)
	c=$(curl -s -o "$OUT/$1-reply.json" -w '%{http_code}' "$url/v1/completions" \
	    -H 'Content-Type: application/json' -d "{\"model\": \"$2\", \"prompt\": [$ids],
	    \"max_tokens\": 64, \"temperature\": 0, \"ignore_eos\": true}")
	t1=$(date +%s.%N)
	n=$(sed -n 's/.*"completion_tokens": *\([0-9]*\).*/\1/p' "$OUT/$1-reply.json")
	echo "completion: HTTP $c, ${n:-no} tokens of 64 in" \
	    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s (one request, 512 ids in)"
	[ "$c" = 200 ] && [ "${n:-0}" = 64 ]
}

# run BLOCK MODEL PROOF VAR=VALUE...: boot (following refusals), the proof line (a
# fixed string in the boot log), the completion, then $hook if set (the server up,
# log its boot log); 0 when all hold.  ns, ctx, pmb: the setting that booted (empty:
# the block's)
run() {
	name=$1 model=$2 proof=$3
	shift 3
	ctx=${COOKBOOK_CTX:-} ns=${COOKBOOK_SESSIONS:-} pmb=${COOKBOOK_PREFIX_MB:-}
	for i in 1 2 3; do
		if boot "$OUT/$name-boot-$i.log" "$@" ${ns:+MEMRA_MAX_SESSIONS=$ns} \
		    ${ctx:+MEMRA_CTX=$ctx} ${pmb:+MEMRA_PREFIX_CACHE_MB=$pmb}; then
			grep '^\[' "$log"
			if grep -q -F -e "$proof" "$log"; then
				echo "proof line: present"
			else
				echo "proof line: MISSING ($proof)"; stop; return 1
			fi
			reply "$name" "$model" || { stop; return 1; }
			[ -z "${hook:-}" ] || $hook || { stop; return 1; }
			stop
			return 0
		fi
		grep '^\[' "$log" | tail -8
		why=$(grep -v '^\[' "$log" | tail -1)
		echo "refused: $why"
		cur_ns=$(echo "$why" | sed -n 's/.*: \([0-9]*\) sessions of ctx [0-9]* need .*/\1/p')
		most=$(echo "$why" | sed -n 's/.*: at most \([0-9]*\) sessions of ctx [0-9]*.*/\1/p')
		octx=$(echo "$why" | sed -n "s/.*, or ${cur_ns:-x} of ctx \\([0-9]*\\).*/\\1/p")
		left=$(echo "$why" | sed -n 's/.*the sessions leave \([0-9]*\) MiB.*/\1/p')
		if [ -n "$most" ] && [ "$most" -ge 1 ]; then
			ns=$most
		elif [ -n "$octx" ]; then
			ctx=$octx
		elif [ -n "$left" ] && [ "$left" -ge 1 ]; then
			pmb=$left
		else
			echo "the refusal names no setting that fits"
			return 1
		fi
		echo "== again with the largest it named:${ns:+ MEMRA_MAX_SESSIONS=$ns}${ctx:+ MEMRA_CTX=$ctx}${pmb:+ MEMRA_PREFIX_CACHE_MB=$pmb}"
	done
	return 1
}

# the files first (a refusal here is the script's: exit 2 or 1, nothing booted)
case " $blocks " in *" long "* | *" dflash "*)
	files "${COOKBOOK_SHAPE_27B:-27b}" sxc
	f27=$f v27=$vocab d27=$d r27=$ranks ;;
esac
case " $blocks " in *" dflash "*)
	sd=${COOKBOOK_SHAPE_DFLASH:-dflash2-27b}
	dd=${TMPDIR:-/tmp}/memra-gguf/$sd-random-BF16.gguf
	made "$dd" -p "$sd" ;;
esac
case " $blocks " in *" gemma "*)
	G=${TMPDIR:-/tmp}/memra-gguf
	sg=${COOKBOOK_SHAPE_GEMMA:-31b} qg=${COOKBOOK_TYPE_GEMMA:-Q6_K}
	sa=${COOKBOOK_SHAPE_GEMMA_ASST:-31b-assistant} sm=${COOKBOOK_SHAPE_GEMMA_MMPROJ:-31b-mmproj}
	fg=$G/gemma4-$sg-random-$qg.gguf ga=$G/gemma4-$sa-random-NVFP4.gguf
	gm=$G/gemma4-$sm-random-BF16.gguf
	mkdir -p "$G" || exit 1
	made "$fg" -p "$sg" -t "$qg"
	made "$ga" -p "$sa" -t NVFP4
	made "$gm" -p "$sm"
	kv() { bin/gguf-inspect -k "$2" "$1"; }
	vg=$(bin/gguf-inspect -t "$fg" | awk -F'\t' '$1 == "token_embd.weight" { split($3, d, ","); print d[2] }')
	[ "$trim" -le "$vg" ] || { echo "$prog: trim $trim: past the vocabulary ($vg)" >&2; exit 2; }
	rg=$OUT/gemma31b-ranks-$trim.gguf.txt
	seq 0 $((trim - 1)) >"$rg.tmp" && mv "$rg.tmp" "$rg" || exit 1
	rm -f "$rg.learned"	# a fresh start: none learned yet
	# what the proof lines say of the files: the drafter's layers and width, the
	# learned slots (512, or every token outside the ranks), the tower's layers and width
	al=$(kv "$ga" gemma4-assistant.block_count) ah=$(kv "$ga" gemma4-assistant.embedding_length)
	sl=$((vg - trim < 512 ? vg - trim : 512))
	vl=$(kv "$gm" clip.vision.block_count) vh=$(kv "$gm" clip.vision.embedding_length) ;;
esac
case " $blocks " in *" ornith"*)
	files "${COOKBOOK_SHAPE_ORNITH:-35b-a3b}" owngen
	for_=$f vor=$vocab dor=$d ror=$ranks ;;
esac
# replies4 FILE: greedy replies to 4 id prompts sent at once (24 new ids each), a line of
# ids each; with a second argument, the rounds drafted (/metrics) on a last line
replies4() {
	python3 - "$url" "$@" <<'PY'
import json, sys, threading, urllib.request
ps = [[5, 17, 250, 3, 99], [7, 7, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [42], list(range(300, 321))]
out = [None] * len(ps)
def one(i):
    q = {"model": "q38", "prompt": ps[i], "max_tokens": 24, "temperature": 0,
         "ignore_eos": True, "return_token_ids": True}
    r = urllib.request.Request(sys.argv[1] + "/v1/completions", json.dumps(q).encode(),
                               {"Content-Type": "application/json"})
    try:
        out[i] = json.load(urllib.request.urlopen(r, timeout=300))["choices"][0]["token_ids"]
    except Exception as e:
        out[i] = "error: %s" % e
th = [threading.Thread(target=one, args=(i,)) for i in range(len(ps))]
[t.start() for t in th]
[t.join() for t in th]
with open(sys.argv[2], "w") as f:
    for o in out:
        f.write(json.dumps(o) + "\n")
    if len(sys.argv) > 3:
        m = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=30).read().decode()
        f.write("rounds %d\n" % sum(float(l.split()[-1]) for l in m.splitlines()
                                     if l.split(" ")[0].split("{")[0] == "memra_spec_rounds_total"))
PY
}

# dflash_proofs: the block's other proof lines in the boot log, and its replies (K by load)
dflash_proofs() {
	for w in "[dspark] arming DFlash2 disables MTP spec (the trunk's MTP head stays unused)" \
	    "[dspark] q38: DFlash2 drafter $dd: " "[dspark] q38: precision q4 (MEMRA_DFLASH_PREC)" \
	    " K=7 (DFlash2 speculative decode for greedy requests)"; do
		grep -q -F -e "$w" "$log" && echo "proof line: present ($w)" ||
			{ echo "proof line: MISSING ($w)"; return 1; }
	done
	replies4 "$OUT/dflash-replies-load.txt"
}

# dflash_plain VAR=VALUE...: the block again with K pinned at 7, then a plain server
# (no drafter, K 0) at the setting that booted; every reply the plain one's, rounds drafted
dflash_plain() {
	boot "$OUT/dflash-k7.log" "$@" ${ns:+MEMRA_MAX_SESSIONS=$ns} ${ctx:+MEMRA_CTX=$ctx} \
	    ${pmb:+MEMRA_PREFIX_CACHE_MB=$pmb} MEMRA_SPEC_K=7 || { echo "K=7: did not boot"; return 1; }
	replies4 "$OUT/dflash-replies-k7.txt" rounds
	stop
	boot "$OUT/dflash-plain.log" MEMRA_MODELS="q38=$f" MEMRA_SPEC_K=0 ${ns:+MEMRA_MAX_SESSIONS=$ns} \
	    ${ctx:+MEMRA_CTX=$ctx} || { echo "plain: did not boot"; return 1; }
	replies4 "$OUT/dflash-replies-plain.txt"
	stop
	[ "$(grep -c '^\[' "$OUT/dflash-replies-plain.txt")" = 4 ] || { echo "plain: no replies"; return 1; }
	for r in load k7; do
		head -4 "$OUT/dflash-replies-$r.txt" | cmp -s - "$OUT/dflash-replies-plain.txt" &&
		    echo "K $r: 4 greedy replies (24 ids each) = plain's" ||
		    { echo "K $r: replies DIFFER from plain's"; return 1; }
	done
	n=$(sed -n 's/^rounds //p' "$OUT/dflash-replies-k7.txt")
	echo "K=7: ${n:-no} rounds drafted"
	[ "${n:-0}" -gt 0 ]
}

# image_chat: one chat completion of an image and a question (16 new tokens, greedy);
# 0 when it is answered
image_chat() {
	python3 - "$url" "$OUT/gemma-image-reply.json" t/data/gemma4/g4-vision/images/a.png <<'PY'
import base64, json, sys, time, urllib.error, urllib.request
url, out, img = sys.argv[1:4]
with open(img, "rb") as f:
    data = "data:image/png;base64," + base64.b64encode(f.read()).decode()
q = {"model": "gemma31", "max_tokens": 16, "temperature": 0, "ignore_eos": True,
     "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": data}},
                                               {"type": "text", "text": "What is this?"}]}]}
r = urllib.request.Request(url + "/v1/chat/completions", json.dumps(q).encode(),
                           {"Content-Type": "application/json"})
t0 = time.time()
try:
    with urllib.request.urlopen(r, timeout=600) as h:
        code, body = h.status, h.read()
except urllib.error.HTTPError as e:
    code, body = e.code, e.read()
dt = time.time() - t0
open(out, "wb").write(body)
try:
    u = json.loads(body)["usage"]
except Exception:
    u = {}
n, p = u.get("completion_tokens"), u.get("prompt_tokens")
print("image chat: HTTP %d, %s tokens of 16, %s prompt tokens (the image's soft tokens in them) in %.2f s"
      " (one request, %s)" % (code, n if n is not None else "no", p if p is not None else "no", dt, img))
sys.exit(0 if code == 200 and n == 16 else 1)
PY
}

# gemma_proofs: the block's other proof lines in the boot log, then the image chat
gemma_proofs() {
	for w in "[gemma-draft] trim adapt: $sl learned slots after the $trim ranks" \
	    "[vision] gemma4 tower: $vl layers, hidden $vh, " \
	    "[vision] images in chat messages as data: URIs: "; do
		grep -q -F -e "$w" "$log" && echo "proof line: present ($w)" ||
			{ echo "proof line: MISSING ($w)"; return 1; }
	done
	w='^\[model\] gemma31: ctx=[0-9]* K=[1-9][0-9]* (assistant speculative decode for greedy requests)$'
	grep -q -e "$w" "$log" && echo "proof line: present ($w)" ||
		{ echo "proof line: MISSING ($w)"; return 1; }
	image_chat || return 1
	n=$(curl -s "$url/metrics" | awk '$1 == "memra_spec_rounds_total" ||
	    index($1, "memra_spec_rounds_total{") == 1 { s += $2 } END { print s + 0 }')
	echo "assistant: $n rounds drafted in the two requests (information: K by load)"
}

fails=0
{
	for b in $blocks; do
		hook=
		case $b in
		long)
			f=$f27 vocab=$v27
			echo "== long: the 27B long-context block on $(basename "$f") ($dev)"
			run long q38 "[worker] q38: regime draft attached ($d27)" \
			    MEMRA_MODELS="q38=$f" MEMRA_MTP_DRAFT="$d27" MEMRA_CTX=262144 \
			    MEMRA_MAX_SESSIONS=32 MEMRA_PREFIX_CACHE_MB=16384 ;;
		ornith)
			f=$for_ vocab=$vor
			echo "== ornith: trunk + masked head on $(basename "$f") ($dev)"
			run ornith ornith "[worker] ornith: regime draft attached ($dor)" \
			    MEMRA_MODELS="ornith=$f+$dor" ;;
		ornith-ranks)
			f=$for_ vocab=$vor
			echo "== ornith-ranks: the ranks-only alternative on $(basename "$f") ($dev)"
			run ornith-ranks ornith "[frspec-trim] self-trimmed head: $trim rows of main output.weight" \
			    MEMRA_FRSPEC_TRIM="$ror" MEMRA_MODELS="ornith=$f" ;;
		dflash)
			f=$f27 vocab=$v27
			echo "== dflash: the DFlash2 drafter block on $(basename "$f") + $(basename "$dd") ($dev)"
			set -- MEMRA_MODELS="q38=$f" MEMRA_DSPARK_SPEC=1 MEMRA_DSPARK_DRAFT="$dd" \
			    MEMRA_FRSPEC_TRIM="$r27" MEMRA_CTX=262144 MEMRA_MAX_SESSIONS=32 \
			    MEMRA_PREFIX_CACHE_MB=16384
			hook=dflash_proofs
			run dflash q38 "[dspark] q38: DFlash2 draft head TRIMMED to $trim rows" "$@" &&
			    hook= && dflash_plain "$@" ;;
		gemma)
			f=$fg vocab=$vg
			echo "== gemma: the Gemma-4 31B vision + drafter block on $(basename "$f") +" \
			    "$(basename "$ga") + $(basename "$gm") ($dev)"
			hook=gemma_proofs
			run gemma gemma31 "[gemma-draft] assistant drafter: $al layers, hidden $ah over the trunk's K/V, head trimmed to $trim rows (" \
			    MEMRA_MODELS="gemma31=$f" MEMRA_DRAFT="$ga" MEMRA_GEMMA_DRAFT_RANKS="$rg" \
			    MEMRA_GEMMA_TRIM_ADAPT=512 MEMRA_GEMMA_VISION=1 MEMRA_GEMMA_MMPROJ="$gm" \
			    MEMRA_CTX=262144 MEMRA_MAX_SESSIONS=16 MEMRA_PREFIX_CACHE_MB=16384 ;;
		esac && echo "$b: PASS" || { echo "$b: FAIL"; fails=$((fails + 1)); }
	done
	[ $fails = 0 ] && echo "COOKBOOK BOOT PASS" || echo "COOKBOOK BOOT FAIL ($fails of the blocks)"
} 2>&1 | tee "$OUT/cookbook.log"
grep -q '^COOKBOOK BOOT PASS' "$OUT/cookbook.log"
