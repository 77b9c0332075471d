#!/usr/bin/env python3
"""serve-identity: a running serve gives every request its solo reply under load.

usage: serve-identity.py URL [-c N] [--vocab V] [--model NAME] [--gap S]

N requests (token-id prompts of 5..1500 ids, so long ones span several
prefill chunks; greedy, and every third seeded-sampled; every fourth
streamed; 8..40 new tokens with ignore_eos) run first one at a time (each
alone on the server), then all N at once, arriving --gap seconds apart while
the earlier ones prefill and decode.  Each reply's text (or token ids) and
finish reason must be byte-identical to its solo run.  Prints one line a
request that differs and "IDENTITY PASS c=N" or "IDENTITY FAIL c=N: K of N
differ"; exits 0 on pass, 1 on a difference or a failed request.  Standard
library only (runs on the device).
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse


def request(url, body):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:300]))
    if not body.get("stream"):
        d = json.loads(r.read())
        ch = d["choices"][0]
        return {"text": ch.get("text"), "ids": ch.get("token_ids"), "finish": ch["finish_reason"]}
    text, ids, fin = "", [], None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        for ch in json.loads(line[6:]).get("choices") or []:
            text += ch.get("text") or ""
            ids += ch.get("token_ids") or []
            fin = ch.get("finish_reason") or fin
    return {"text": text, "ids": ids or None, "finish": fin}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("-c", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--model", default="")
    ap.add_argument("--gap", type=float, default=0.05)
    a = ap.parse_args()
    rng = random.Random(7)
    reqs = []
    for i in range(a.c):
        n = 5 + (i * 211) % 1500
        q = {"prompt": [rng.randrange(100, a.vocab) for _ in range(n)], "temperature": 0,
             "max_tokens": 8 + (i * 7) % 33, "ignore_eos": True}
        if i % 3 == 2:
            q.update(temperature=0.8, top_p=0.95, seed=1000 + i)
        if i % 4 == 1:
            q["stream"] = True
        if a.model:
            q["model"] = a.model
        reqs.append(q)
    solo = [request(a.url, q) for q in reqs]
    got = [None] * a.c
    errs = []

    def run(i):
        time.sleep(a.gap * i)
        try:
            got[i] = request(a.url, reqs[i])
        except Exception as e:
            errs.append("request %d: %s" % (i, e))

    ts = [threading.Thread(target=run, args=(i,)) for i in range(a.c)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    bad = [i for i in range(a.c) if got[i] != solo[i]]
    for e in errs:
        print(e)
    for i in bad:
        print("request %d (%d prompt ids, %s): together %s, alone %s" %
              (i, len(reqs[i]["prompt"]), "sampled" if reqs[i]["temperature"] else "greedy",
               json.dumps(got[i])[:200], json.dumps(solo[i])[:200]))
    if bad or errs:
        print("IDENTITY FAIL c=%d: %d of %d differ" % (a.c, len(bad), a.c))
        sys.exit(1)
    print("IDENTITY PASS c=%d" % a.c)


main()
