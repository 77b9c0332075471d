#!/usr/bin/env python3
"""make-a-greedy.py: the greedy gate's cases from fixture model A's refs.json.

    python3 tools/make-a-greedy.py ../shared/models/A/refs.json > t/data/a-greedy.tsv

One line per b_greedy prompt: prompt ids, a tab, the 64 reference greedy ids,
a tab, the smallest top-1 - top-2 margin along them.
"""
import json
import sys

refs = json.load(open(sys.argv[1]))
for g in refs["b_greedy"]:
    print(" ".join(map(str, g["input_ids"])), " ".join(map(str, g["new_ids"])),
          g["min_margin"], sep="\t")
