#!/usr/bin/env python3
"""serve-load: a bounded load and fault test of a running serve (loopback).

usage: serve-load.py URL PID PROMPTS.jsonl [-n N] [-c C] [--seed S] [--model M]
                     [--key KEY] [--rss-slack-mb MB] [--settle-s S]

N requests (default 2000) at concurrency C (default 64) against the server
at URL whose process is PID, mixed: chat and completions, streamed and not,
greedy and seeded-sampled, over prompts cut from PROMPTS.jsonl; about 10%
are streams cancelled after a few events, about 5% malformed (bad JSON,
wrong types, a body over the limit, a header over the limit, a garbage
request line, slow headers that finish, slow headers that give up).

Checks, each a line on stdout, exit 1 when one fails:
  - every status is one the design allows for that kind (200, or 503 when
    the server is busy; 400/404/413/431 for the malformed kinds);
  - every completed reply equals the same request's reply run alone first
    (greedy and seeded-sampled requests are reproducible by contract);
  - afterwards the server's open file descriptors are back to their count
    before the load and its RSS within --rss-slack-mb (default 64 MiB) of it
    (read from /proc/PID; glibc keeps some freed heap, hence the slack).
Stops by itself: every socket has a timeout and the run a fixed size.
"""
import argparse
import http.client
import json
import os
import random
import socket
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

TIMEOUT = 300


def proc_numbers(pid):
    with open("/proc/%d/status" % pid) as f:
        rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
    return rss, len(os.listdir("/proc/%d/fd" % pid))


class Load:
    def __init__(self, a):
        u = urllib.parse.urlparse(a.url)
        self.host, self.port, self.a = u.hostname, u.port, a
        self.auth = {"Authorization": "Bearer " + a.key} if a.key else {}
        lines = [json.loads(l)["prompt"] for l in open(a.prompts)]
        self.prompts = [p[:n] for p in lines[:4] for n in (80, 240)]

    def conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT)

    def body(self, r):
        p = self.prompts[r.randrange(len(self.prompts))]
        q = {"model": self.a.model, "max_tokens": r.choice((8, 16)), "temperature": 0}
        if r.random() < 0.25:
            q.update(temperature=0.8, top_p=0.95, seed=r.randrange(2))
        if r.random() < 0.5:
            q["messages"] = [{"role": "user", "content": p}]
            path = "/v1/chat/completions"
        else:
            q["prompt"] = p
            path = "/v1/completions"
        q["stream"] = r.random() < 0.5
        return path, q

    def plan(self):
        """The requests: (kind, path, body or fault name)."""
        r, out = random.Random(self.a.seed), []
        faults = ["bad-json", "wrong-type", "oversized", "big-header", "garbage", "no-path",
                  "slow-header", "slowloris"]
        for i in range(self.a.n):
            x = r.random()
            if x < 0.05:
                out.append(("fault", None, faults[i % len(faults)]))
            elif x < 0.15:
                path, q = self.body(r)
                q.update(stream=True, max_tokens=400, ignore_eos=True)
                out.append(("cancel", path, q))
            else:
                path, q = self.body(r)
                out.append(("ok", path, q))
        return out

    def post(self, path, q):
        """(status, text): a reply's text, streamed or not."""
        c = self.conn()
        try:
            c.request("POST", path, json.dumps(q), {"Content-Type": "application/json", **self.auth})
            resp = c.getresponse()
            if resp.status != 200:
                resp.read()
                return resp.status, None
            if not q.get("stream"):
                ch = json.loads(resp.read())["choices"][0]
                m = ch.get("message") or {}
                return 200, [ch.get("text"), m.get("content"), m.get("reasoning_content"),
                             ch.get("finish_reason")]
            parts, done = [], False
            for line in resp:
                line = line.decode().rstrip("\n")
                if line == "data: [DONE]":
                    done = True
                    break
                if line.startswith("data: "):
                    for ch in json.loads(line[6:]).get("choices", []):
                        d = ch.get("delta") or {}
                        parts.append([ch.get("text"), d.get("content"),
                                      d.get("reasoning_content"), ch.get("finish_reason")])
            return (200, parts) if done else (-1, None)
        finally:
            c.close()

    def cancel(self, path, q):
        c = self.conn()
        try:
            c.request("POST", path, json.dumps(q), {"Content-Type": "application/json", **self.auth})
            resp = c.getresponse()
            if resp.status == 200:
                for _ in range(3):
                    resp.fp.readline()
            return resp.status
        finally:
            c.sock and c.sock.close()
            c.close()

    def raw(self, data, pause=0, rest=b"", close_early=False):
        """Send bytes by hand; the status line's code, or 0 when none came."""
        s = socket.create_connection((self.host, self.port), timeout=TIMEOUT)
        try:
            s.sendall(data)
            if pause:
                time.sleep(pause)
            if close_early:
                return 0
            if rest:
                s.sendall(rest)
            got = b""
            while b"\r\n" not in got:
                b = s.recv(4096)
                if not b:
                    break
                got += b
            return int(got.split(b" ")[1]) if got.startswith(b"HTTP/1.1 ") else 0
        finally:
            s.close()

    def fault(self, name):
        auth = "".join("%s: %s\r\n" % kv for kv in self.auth.items())
        head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\n" % auth

        def req(body):
            return (head + "Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)).encode() + body
        good = json.dumps({"model": self.a.model, "prompt": "def f(x):", "max_tokens": 4,
                           "temperature": 0}).encode()
        if name == "bad-json":
            return self.raw(req(b'{"prompt": "x", '))
        if name == "wrong-type":
            return self.raw(req(b'{"prompt": 3, "max_tokens": 4}'))
        if name == "oversized":
            return self.raw((head + "Content-Length: 20000000\r\n\r\n").encode() + b"{" * 1000)
        if name == "big-header":
            return self.raw((head + "X-Pad: %s\r\n\r\n" % ("a" * 20000)).encode())
        if name == "garbage":
            return self.raw(b"\x16\x03\x01 hello\r\n\r\n")
        if name == "no-path":
            return self.raw(b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = req(good)
        if name == "slow-header":
            return self.raw(data[:20], pause=1.0, rest=data[20:])
        return self.raw(data[:30], pause=0.5, close_early=True)	# slowloris that gives up


ALLOWED = {
    "ok": {200, 503}, "cancel": {200, 503},
    "bad-json": {400}, "wrong-type": {400}, "oversized": {413}, "big-header": {431},
    "garbage": {400}, "no-path": {404}, "slow-header": {200, 503}, "slowloris": {0},
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url")
    ap.add_argument("pid", type=int)
    ap.add_argument("prompts")
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("-c", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default="a")
    ap.add_argument("--key", default=None)
    ap.add_argument("--rss-slack-mb", type=float, default=64)
    ap.add_argument("--settle-s", type=float, default=30)
    a = ap.parse_args()
    ld = Load(a)
    plan = ld.plan()
    t0 = time.time()
    # each distinct request alone first: the reference its loaded reply must equal
    solo = {}
    for kind, path, q in plan:
        k = json.dumps([path, q], sort_keys=True)
        if kind == "ok" and k not in solo:
            st, text = ld.post(path, q)
            if st != 200:
                print("FAIL solo %s: status %d" % (k, st))
                return 1
            solo[k] = text
    t_solo = time.time() - t0
    time.sleep(1)
    rss0, fds0 = proc_numbers(a.pid)
    fails, counts, lock = [], {}, threading.Lock()

    def one(item):
        kind, path, q = item
        if kind == "ok":
            st, text = ld.post(path, q)
            if st == 200 and text != solo[json.dumps([path, q], sort_keys=True)]:
                with lock:
                    fails.append("reply differs from its solo run: %s %s" % (path, json.dumps(q)))
        elif kind == "cancel":
            st = ld.cancel(path, q)
        else:
            st, kind = ld.fault(q), q
        with lock:
            counts[(kind, st)] = counts.get((kind, st), 0) + 1
            if st not in ALLOWED[kind]:
                fails.append("%s: status %d not in %s" % (kind, st, sorted(ALLOWED[kind])))

    t1 = time.time()
    with ThreadPoolExecutor(a.c) as ex:
        for f in [ex.submit(one, it) for it in plan]:
            try:
                f.result()
            except Exception as e:	# a socket error, a timeout: not a designed answer
                fails.append("request failed: %r" % e)
    t_load = time.time() - t1
    deadline = time.time() + a.settle_s
    while True:	# cancelled streams end at the server's next token; threads exit
        rss1, fds1 = proc_numbers(a.pid)
        if (fds1 <= fds0 and rss1 <= rss0 + a.rss_slack_mb * 2**20) or time.time() > deadline:
            break
        time.sleep(0.2)
    for (kind, st), n in sorted(counts.items()):
        print("%-12s %3d %5d" % (kind, st, n))
    print("distinct requests run alone: %d (%.1f s); %d requests at c=%d: %.1f s" %
          (len(solo), t_solo, len(plan), a.c, t_load))
    print("fds %d -> %d; RSS %.1f -> %.1f MiB (slack %.0f MiB)" %
          (fds0, fds1, rss0 / 2**20, rss1 / 2**20, a.rss_slack_mb))
    if fds1 > fds0:
        fails.append("open file descriptors %d, %d before the load" % (fds1, fds0))
    if rss1 > rss0 + a.rss_slack_mb * 2**20:
        fails.append("RSS %.1f MiB, %.1f MiB before the load" % (rss1 / 2**20, rss0 / 2**20))
    for f in fails[:20]:
        print("FAIL " + f)
    print("ok" if not fails else "%d failures" % len(fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
