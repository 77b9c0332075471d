#!/bin/sh
# spec-accept-all.sh [MODEL_DIR] [K-RANGE]: run-spec over all 64 prompts of
# fixture A (prompts.jsonl, raw, 64 new tokens) and compare each K's accepted
# draft count with refs.json d_speculative.per_K[K].accepted, and the
# acceptance trace run-spec writes (--trace-out) with its per-prompt counts:
# each prompt's accepted drafts and rounds with drafts (per_prompt_accepted,
# per_prompt_rounds) and the steps without drafts (plain_steps_without_drafts)
# (about 2.5 minutes at 2 threads on a 2-core machine; t/run-spec.bats runs
# it); prints run-spec's lines and one line per K, exits 1 on any difference
# or FAIL.  refs.json has K=1..4.
set -eu
d=${1:-../shared/models/A}
ks=${2:-1-4}
trace=$(mktemp)
trap 'rm -f "$trace"' EXIT
out=$("$(dirname "$0")/../bin/run-spec" --raw --jsonl -K "$ks" -n 64 -t "${THREADS:-2}" \
    --trace-out "$trace" "$d" <"$d/prompts.jsonl")
printf '%s\n' "$out"
printf '%s\n' "$out" | python3 -c '
import json, re, sys
refs = json.load(open(sys.argv[1]))["d_speculative"]["per_K"]
trace = {}
for line in open(sys.argv[2]):
    j = json.loads(line)
    if "memra_spec_trace" in j:
        sec = trace.setdefault(str(j["K"]), [])
    else:
        sec.append(j["rounds"])
bad = 0
for line in sys.stdin:
    m = re.match(r"K=(\d+) .*acceptance (\d+)/(\d+)", line)
    if not m:
        continue
    k, acc = m.group(1), int(m.group(2))
    want = refs[k]["accepted"]
    t = trace.get(k, [])
    per = [(sum(a for _, a in p), sum(1 for n, _ in p if n > 0)) for p in t]
    ref = list(zip(refs[k]["per_prompt_accepted"], refs[k]["per_prompt_rounds"]))
    same = sum(x == y for x, y in zip(per, ref))
    plain = sum(1 for p in t for n, _ in p if n == 0)
    ok = acc == want and "PASS" in line and same == len(ref) == len(per) and \
        plain == refs[k]["plain_steps_without_drafts"]
    bad += not ok
    print("K=%s: accepted %d, refs.json %d; the trace: %d/%d prompts as refs.json, %d steps "
          "without drafts (refs.json %d): %s" % (k, acc, want, same, len(ref), plain,
          refs[k]["plain_steps_without_drafts"], "ok" if ok else "DIFFERENT"))
sys.exit(1 if bad else 0)
' "$d/refs.json" "$trace"
