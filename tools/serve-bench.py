#!/usr/bin/env python3
"""serve-bench: requests/s and generated tok/s of a running serve at given concurrencies.

usage: serve-bench.py URL MODEL PROMPTS.jsonl [-n REQUESTS] [-m MAX_TOKENS] [-c 1,4] [--chat]
Each request takes the next "prompt" of PROMPTS.jsonl (cycled), greedy, max_tokens MAX_TOKENS.
Prints one line per concurrency: requests, wall seconds, requests/s, completion tok/s, mean latency.
"""
import argparse
import concurrent.futures
import itertools
import json
import time

import openai


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("model")
    ap.add_argument("prompts")
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("-m", type=int, default=32)
    ap.add_argument("-c", default="1,4")
    ap.add_argument("--chat", action="store_true")
    a = ap.parse_args()
    prompts = [json.loads(l)["prompt"] for l in open(a.prompts) if l.strip()]
    c = openai.OpenAI(base_url=a.url + "/v1", api_key="x", max_retries=0, timeout=3600)

    def one(p):
        t0 = time.monotonic()
        if a.chat:
            r = c.chat.completions.create(model=a.model, messages=[{"role": "user", "content": p}],
                                          max_tokens=a.m, temperature=0)
        else:
            r = c.completions.create(model=a.model, prompt=p, max_tokens=a.m, temperature=0)
        return r.usage.completion_tokens, time.monotonic() - t0

    for conc in [int(x) for x in a.c.split(",")]:
        ps = list(itertools.islice(itertools.cycle(prompts), a.n))
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(conc) as ex:
            res = list(ex.map(one, ps))
        wall = time.monotonic() - t0
        toks = sum(r[0] for r in res)
        print("concurrency=%d requests=%d wall=%.2fs req/s=%.3f completion_tok/s=%.2f "
              "mean_latency=%.2fs tokens=%d" % (conc, len(res), wall, len(res) / wall, toks / wall,
                                               sum(r[1] for r in res) / len(res), toks), flush=True)


main()
