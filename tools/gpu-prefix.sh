#!/bin/sh
# gpu-prefix.sh: the prefix cache and the reuse pool on the GPU (issue 25's
# identity), on model A and its NVFP4 GGUF.
#   usage: OUT=DIR sh tools/gpu-prefix.sh [N]
# 1. t/tools/prefix-exact -d cuda on A with N ids (default 1300), with the
#    default (bf16) prompt GEMM and with -g int8: the ways a prefill may be cut
#    against the scheduler's (chunks of 512); "chunks again" (a resume at a
#    chunk's end, the only resume the prefix cache makes on cuda:
#    backend_cut_exact) must read EXACT under both; the resumes inside a
#    chunk are reported (on the H200 of 2026-12-05 they DIFFER under bf16).
# 2. serve on cuda three ways, each over the same 4 conversations of 8 turns
#    at once (tools/serve-turns.py, chat, greedy, 32 new tokens a turn, a
#    system prompt padded past one chunk of 512 so that turns resume on cuda):
#    both off (MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0), both on (the
#    defaults), the cache alone (MEMRA_REUSE_POOL=0 MEMRA_PREFIX_CACHE_MB=256);
#    every reply of "on" and "cache" must be byte-identical to "off", and
#    their cached_tokens must be > 0 from turn 2.  Each run's turns (TTFT
#    included) in $OUT/turns-MODEL-WAY.jsonl, the servers' logs beside them;
#    the verdict lines in $OUT/prefix.log.  Exit 0 when all hold.
set -u
OUT=${OUT:-$(mktemp -d)}
cd "$(dirname "$0")/.." || exit 2
A=${A:-models/A}
N=${1:-1300}
D=${GPU_PREFIX_DEVICE:-cuda}	# cpu: the same checks on this machine's CPU (no build)
G=${TMPDIR:-/tmp}/memra-gguf
[ -d "$A" ] || { echo "gpu-prefix: $A: no model A here" >&2; exit 2; }
[ "$D" = cpu ] || make CUDA=1 CUDA_ARCH=90 -j16 all build/t/tools/prefix-exact \
    >"$OUT/build-prefix.log" 2>&1 || { tail -20 "$OUT/build-prefix.log"; exit 1; }
mkdir -p "$G"
[ -e "$G/A-nvfp4.gguf" ] || bin/quant-nvfp4 "$A" "$G/A-nvfp4.gguf" >"$OUT/prefix-gguf.log" 2>&1
ok=0
{
	for g in bf16 int8; do
		f=$OUT/prefix-exact-$g.log
		timeout 120 build/t/tools/prefix-exact -d "$D" -g $g "$A" "$N" >"$f" 2>&1 || ok=1
		cat "$f"
		nr=$(grep -c 'resumed at .* inside a chunk' "$f")
		ne=$(grep 'resumed at .* inside a chunk' "$f" | grep -c EXACT)
		if grep -q "^chunks again.*EXACT$" "$f"; then c=EXACT; else c=DIFFERS; ok=1; fi
		echo "prefix-exact -d $D -g $g: a resume at a chunk's end $c; $ne of $nr resumes" \
		    "inside a chunk EXACT"
	done
	port=18770
	for m in "$A" "$G/A-nvfp4.gguf"; do
		[ -e "$m" ] || { echo "$m: missing"; ok=1; continue; }
		b=$(basename "$m" .gguf)
		for way in off on cache; do
			case $way in
			off) env="MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0" ;;
			on) env= ;;
			cache) env="MEMRA_REUSE_POOL=0 MEMRA_PREFIX_CACHE_MB=256" ;;
			esac
			port=$((port + 1))
			# shellcheck disable=SC2086
			env MEMRA_MODELS="a=$m" MEMRA_DEVICE=$D MEMRA_MAX_SESSIONS=8 MEMRA_CTX=2048 $env \
			    bin/serve --port $port >"$OUT/serve-$b-$way.log" 2>&1 &
			sp=$!
			for _ in $(seq 120); do
				python3 -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=2)' \
				    "http://127.0.0.1:$port/health" 2>/dev/null && break
				sleep 1
			done
			timeout 300 python3 tools/serve-turns.py "http://127.0.0.1:$port" turns -c 4 -t 8 -g 32 --pad 600 \
			    >"$OUT/turns-$b-$way.jsonl" 2>>"$OUT/serve-$b-$way.log" || ok=1
			kill $sp 2>/dev/null
			wait $sp 2>/dev/null
		done
		for way in on cache; do
			if [ -s "$OUT/turns-$b-off.jsonl" ] && python3 - "$OUT/turns-$b-off.jsonl" \
			    "$OUT/turns-$b-$way.jsonl" <<'EOF'
import json, sys
off = [json.loads(l) for l in open(sys.argv[1])]
on = [json.loads(l) for l in open(sys.argv[2])]
same = len(off) == len(on) and all(a["content"] == b["content"] for a, b in zip(off, on))
late = [r["cached_tokens"] or 0 for r in on if r["turn"] > 1]
ttft = lambda rs, t: sorted(r["ttft_ms"] for r in rs if r["turn"] == t)
print("  %d turns, replies %s; cached_tokens from turn 2: min %d, sum %d; turn 8 TTFT ms "
      "median %.1f (off %.1f)" % (len(on), "= off" if same else "DIFFER from off", min(late or [0]),
      sum(late), ttft(on, 8)[len(ttft(on, 8)) // 2], ttft(off, 8)[len(ttft(off, 8)) // 2]))
sys.exit(0 if same and late and min(late) > 0 else 1)
EOF
			then echo "$b $way: IDENTICAL to off"; else echo "$b $way: FAIL"; ok=1; fi
		done
		grep -h 'reuse:' "$OUT/serve-$b-on.log" | head -3
		grep -h 'prefix cache:' "$OUT/serve-$b-cache.log" | head -1
	done
	[ $ok = 0 ] && echo "PREFIX GPU PASS" || echo "PREFIX GPU FAIL"
} >"$OUT/prefix.log" 2>&1
grep -E '^(prefix-exact|A|A-nvfp4|PREFIX)' "$OUT/prefix.log"
exit $ok
