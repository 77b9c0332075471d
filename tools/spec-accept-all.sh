#!/bin/sh
# spec-accept-all.sh [MODEL_DIR] [K-RANGE]: run-spec over all 64 prompts of
# fixture A (prompts.jsonl, raw, 64 new tokens) and compare each K's accepted
# draft count with refs.json d_speculative.per_K[K].accepted (about 2.5
# minutes at 2 threads on a 2-core machine; t/run-spec.bats runs it); prints
# run-spec's lines and one line per K, exits 1 on any difference or FAIL.  refs.json has K=1..4.
set -eu
d=${1:-../shared/models/A}
ks=${2:-1-4}
out=$("$(dirname "$0")/../bin/run-spec" --raw --jsonl -K "$ks" -n 64 -t "${THREADS:-2}" "$d" <"$d/prompts.jsonl")
printf '%s\n' "$out"
printf '%s\n' "$out" | python3 -c '
import json, re, sys
refs = json.load(open(sys.argv[1]))["d_speculative"]["per_K"]
bad = 0
for line in sys.stdin:
    m = re.match(r"K=(\d+) .*acceptance (\d+)/(\d+)", line)
    if not m:
        continue
    k, acc = m.group(1), int(m.group(2))
    want = refs[k]["accepted"]
    ok = acc == want and "PASS" in line
    bad += not ok
    print("K=%s: accepted %d, refs.json %d: %s" % (k, acc, want, "ok" if ok else "DIFFERENT"))
sys.exit(1 if bad else 0)
' "$d/refs.json"
