#!/usr/bin/env python3
"""make-a-greedy.py: the GPU gates' cases from fixture model A's refs.json.

    python3 tools/make-a-greedy.py REFS > t/data/a-greedy.tsv
    python3 tools/make-a-greedy.py REFS spec > t/data/a-spec-refs.txt

Default: one line per b_greedy prompt: prompt ids, a tab, the 64 reference
greedy ids, a tab, the smallest top-1 - top-2 margin along them.
spec: the reference speculative acceptance summed over those prompts
(d_speculative covers prompts 0..63 in the same order), one line per K.
"""
import json
import sys

refs = json.load(open(sys.argv[1]))
greedy = refs["b_greedy"]
if len(sys.argv) > 2 and sys.argv[2] == "spec":
    per_k = refs["d_speculative"]["per_K"]
    n = len(greedy)
    for k in sorted(per_k, key=int):
        print("K=%s accepted %d rounds %d (prompts 0-%d of refs.json d_speculative)" % (
            k, sum(per_k[k]["per_prompt_accepted"][:n]),
            sum(per_k[k]["per_prompt_rounds"][:n]), n - 1))
else:
    for g in greedy:
        print(" ".join(map(str, g["input_ids"])), " ".join(map(str, g["new_ids"])),
              g["min_margin"], sep="\t")
