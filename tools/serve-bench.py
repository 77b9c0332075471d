#!/usr/bin/env python3
"""serve-bench: an OpenAI-compatible server under load, at given concurrencies.

usage: serve-bench.py URL [-c 1,2,4,8] [-p PROMPT_LEN] [-g GEN_LEN] [-n REQUESTS]
                      [--vocab N] [--model NAME] [--seed S] [--json]

For each concurrency c, c clients each send streamed /v1/completions requests
back to back (a closed loop of c streams) until -n requests (default 2 c, at
least 4) are done.  Every request has a prompt of PROMPT_LEN random token ids
(< --vocab; each request its own, so no prompt cache serves one; the same for
every server) and asks for exactly
GEN_LEN new tokens (ignore_eos, temperature 0), so memra's serve and llama.cpp's
llama-server see the same work.  Standard library only (runs on the device).

One line a concurrency: aggregate tok/s (generated tokens / wall), per-stream
tok/s (median over requests of (tokens - 1) / (last chunk - first chunk)), TTFT
p50 / p99 and inter-token latency p50 / p99 (gaps between streamed chunks; both
servers send a chunk a token on these prompts), in ms.  --json prints the same
as one JSON object a line.
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def one(url, body):
    """One streamed request: (tokens, ttft s, [chunk gaps s], stream s)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    t0 = time.monotonic()
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:200]))
    times, usage = [], None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        d = json.loads(line[6:])
        if d.get("usage"):
            usage = d["usage"].get("completion_tokens")
        ch = d.get("choices") or []
        if ch and (ch[0].get("text") or ch[0].get("token_ids")):
            times.append(time.monotonic())
    conn.close()
    if not times:
        raise RuntimeError("no tokens streamed")
    gaps = [b - a for a, b in zip(times, times[1:])]
    return usage or len(times), times[0] - t0, gaps, times[-1] - times[0]


def prompt(a, c, i):
    """Request i's prompt at concurrency c: its own ids, never a prefix another request had
    (a server's prompt cache must not serve one; the same for every server)."""
    rng = random.Random((a.seed * 1000003 + c) * 1000003 + i)
    # ids from 100 up: clear of the special tokens low in most vocabularies
    return [rng.randrange(100, a.vocab) for _ in range(a.p)]


def run(a, c):
    n = a.n or max(4, 2 * c)
    todo = list(range(n))
    lock = threading.Lock()
    res, errs = [], []

    def client():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            body = {"prompt": prompt(a, c, i), "max_tokens": a.g, "temperature": 0,
                    "ignore_eos": True, "stream": True,
                    "stream_options": {"include_usage": True}}
            if a.model:
                body["model"] = a.model
            try:
                r = one(a.url, body)
                with lock:
                    res.append(r)
            except Exception as e:  # a failed request is reported, not counted
                with lock:
                    errs.append(str(e))

    t0 = time.monotonic()
    ts = [threading.Thread(target=client) for _ in range(c)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.monotonic() - t0
    toks = sum(r[0] for r in res)
    gaps = [g for r in res for g in r[2]]
    stream = [(r[0] - 1) / r[3] for r in res if r[3] > 0]
    return {"c": c, "requests": len(res), "errors": len(errs), "wall_s": round(wall, 3),
            "agg_tok_s": round(toks / wall, 2),
            "stream_tok_s": round(statistics.median(stream), 2) if stream else None,
            "ttft_p50_ms": round(1e3 * pct([r[1] for r in res], 0.5), 1),
            "ttft_p99_ms": round(1e3 * pct([r[1] for r in res], 0.99), 1),
            "itl_p50_ms": round(1e3 * pct(gaps, 0.5), 2),
            "itl_p99_ms": round(1e3 * pct(gaps, 0.99), 2),
            "tokens": toks, "first_error": errs[0] if errs else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("-c", default="1,2,4,8")
    ap.add_argument("-p", type=int, default=128, help="prompt tokens")
    ap.add_argument("-g", type=int, default=64, help="generated tokens")
    ap.add_argument("-n", type=int, default=0, help="requests a concurrency")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--model", default="")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for c in [int(x) for x in a.c.split(",")]:
        r = run(a, c)
        if a.json:
            print(json.dumps(r), flush=True)
        else:
            print("c=%d requests=%d errors=%d wall=%.2fs agg=%.2f tok/s stream=%s tok/s "
                  "ttft p50/p99=%.1f/%.1f ms itl p50/p99=%.2f/%.2f ms" %
                  (c, r["requests"], r["errors"], r["wall_s"], r["agg_tok_s"], r["stream_tok_s"],
                   r["ttft_p50_ms"], r["ttft_p99_ms"], r["itl_p50_ms"], r["itl_p99_ms"]),
                  flush=True)
        if r["errors"]:
            print("serve-bench: %d requests failed: %s" % (r["errors"], r["first_error"]),
                  file=sys.stderr)


main()
