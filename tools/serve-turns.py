#!/usr/bin/env python3
"""serve-turns: multi-turn conversations and shared-prefix requests against a server.

usage: serve-turns.py URL turns [-c CONVS] [-t TURNS] [-g MAX] [--pad WORDS] [--model NAME]
       serve-turns.py URL shared [-n REQUESTS] [-c C] [-p SHARED] [-q OWN] [-g GEN]
                      [--vocab N] [--seed S] [--model NAME]
       serve-turns.py URL idturns [-c CONVS] [-t TURNS] [-p FIRST] [-q NEW] [-g GEN]
                      [--api openai|llama] [--turns-log F] [--vocab N] [--seed S] [--model NAME]

turns: CONVS conversations (each in its own thread, all at once) of TURNS
turns each on /v1/chat/completions, streamed, temperature 0, MAX new tokens:
each turn sends the whole conversation so far plus a new user message
(--pad: the system prompt grows by that many words of a fixed text, so that
a conversation passes a prefill chunk).  One
JSON line a turn: conversation, turn, prompt_tokens, cached_tokens (usage.
prompt_tokens_details; null when the server does not say), ttft_ms (request
sent to the first content chunk) and the reply's content.  Two servers' runs
compare by content (the prefix cache's identity: cache on = both off) and by
ttft_ms (turn over turn).

idturns: the turns of CONVS conversations by token ids (a random-weight file
has no chat template, and its text does not tokenize back to its ids): turn 1
sends FIRST random ids, each later turn the conversation so far (every
prompt and every reply, as ids) plus NEW random ids; GEN new tokens a turn
(ignore_eos, temperature 0).  The reply's ids come back by --api openai
(memra's /v1/completions with return_token_ids, streamed: the chunks'
token_ids) or --api llama (llama-server's /completion with return_tokens and
cache_prompt: the chunks' tokens).  One JSON line: CONVS and TURNS, the
median over the conversations of turn 1's TTFT (cold) and the last turn's,
their ratio, the TTFT p50 of turns 2.., the aggregate tok/s and the cached
tokens the replies reported (openai: usage.prompt_tokens_details; llama:
tokens_cached); --turns-log writes a line a turn (conversation, turn,
prompt tokens, cached, ttft_ms).

shared: REQUESTS streamed /v1/completions in a closed loop of C streams, each
prompt SHARED random token ids (the same for every request: a long system
prompt) then OWN ids of its own, GEN new tokens each (ignore_eos,
temperature 0).  One JSON line: TTFT p50 / p99 ms, aggregate tok/s, the
cached_tokens the replies reported.  Standard library only (runs on the
device, where no openai client is installed).
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

TOPICS = ["the sea", "a lighthouse keeper", "winter birds", "an old clock", "the river at night",
          "a market in spring", "the last train", "a garden after rain"]


PAD = ("the harbour wall was built of grey stone and every winter the waves took a little "
       "of it back").split()


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def events(url, path, body):
    """POST body (JSON) to url's path; yield each server-sent event's JSON
    up to [DONE] (an error status raises, with the body's start)."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:200]))
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            yield json.loads(data)
    finally:
        c.close()


def stream(url, path, body):
    """POST a streamed request: (content, usage or None, ttft s, tokens)."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    text, usage, ttft, n = [], None, None, 0
    t0 = time.monotonic()
    for ev in events(url, path, body):
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices") or []:
            piece = (ch.get("delta") or {}).get("content") if "delta" in ch else ch.get("text")
            if piece:
                if ttft is None:
                    ttft = time.monotonic() - t0
                text.append(piece)
                n += 1
    return "".join(text), usage, ttft, n


def stream_ids(url, api, body):
    """POST a streamed token-id completion: (reply ids, ttft s, cached or None).
    api "openai": /v1/completions with return_token_ids; "llama":
    llama-server's /completion with return_tokens."""
    if api == "openai":
        path = "/v1/completions"
        body = {"prompt": body["prompt"], "max_tokens": body["n"], "temperature": 0,
                "ignore_eos": True, "stream": True, "return_token_ids": True,
                "stream_options": {"include_usage": True}, **body.get("extra", {})}
    else:
        path = "/completion"
        body = {"prompt": body["prompt"], "n_predict": body["n"], "temperature": 0,
                "ignore_eos": True, "stream": True, "return_tokens": True,
                "cache_prompt": True, **body.get("extra", {})}
    ids, ttft, cached = [], None, None
    t0 = time.monotonic()
    for ev in events(url, path, body):
        if api == "openai":
            if ev.get("usage"):
                cached = cached_of(ev["usage"])
            got = [t for ch in ev.get("choices") or [] for t in ch.get("token_ids") or []]
        else:
            got = ev.get("tokens") or []
            if ev.get("stop"):
                cached = ev.get("tokens_cached")
        if got and ttft is None:
            ttft = time.monotonic() - t0
        ids += got
    return ids, ttft, cached


def idturns(args):
    rng = random.Random(args.seed)
    convs = [[rng.randrange(1, args.vocab) for _ in range(args.p)] for _ in range(args.c)]
    news = [[[rng.randrange(1, args.vocab) for _ in range(args.q)] for _ in range(args.t)]
            for _ in range(args.c)]
    out, lock, gen = [], threading.Lock(), [0]
    extra = {"model": args.model} if args.model else {}

    def conversation(k):
        hist = []
        for t in range(args.t):
            prompt = hist + (convs[k] if t == 0 else []) + news[k][t]
            ids, ttft, cached = stream_ids(args.url, args.api, {"prompt": prompt, "n": args.g,
                                                                "extra": extra})
            if len(ids) != args.g or ttft is None:
                raise RuntimeError("conversation %d, turn %d: %d of %d ids" %
                                   (k, t + 1, len(ids), args.g))
            hist = prompt + ids
            with lock:
                gen[0] += len(ids)
                out.append({"conversation": k, "turn": t + 1, "prompt_tokens": len(prompt),
                            "cached_tokens": cached, "ttft_ms": round(ttft * 1e3, 2)})

    wall = together([lambda k=k: conversation(k) for k in range(args.c)])
    out.sort(key=lambda r: (r["conversation"], r["turn"]))
    if args.turns_log:
        with open(args.turns_log, "a") as f:
            for r in out:
                f.write(json.dumps(r) + "\n")
    first = [r["ttft_ms"] for r in out if r["turn"] == 1]
    last = [r["ttft_ms"] for r in out if r["turn"] == args.t]
    later = [r["ttft_ms"] for r in out if r["turn"] > 1]
    cached = [r["cached_tokens"] for r in out if r["cached_tokens"] is not None]
    f1, fl = statistics.median(first), statistics.median(last)
    print(json.dumps({"c": args.c, "turns": args.t, "first": args.p, "new": args.q,
                      "gen": args.g, "wall_s": round(wall, 3),
                      "agg_tok_s": round(gen[0] / wall, 2),
                      "turn1_ttft_ms": round(f1, 2), "turnN_ttft_ms": round(fl, 2),
                      "turnN_over_turn1": round(fl / f1, 4) if f1 else None,
                      "ttft_p50_ms": round(pct(later, 0.5), 2) if later else None,
                      "cached_tokens": sum(cached) if cached else None}))


def together(fns):
    """Run fns, each in its own thread, all at once: the seconds they took.
    The first exception any raises ends the run with its message."""
    err = []

    def run(f):
        try:
            f()
        except Exception as e:  # named, not a traceback
            err.append(str(e))

    t0 = time.monotonic()
    th = [threading.Thread(target=run, args=(f,)) for f in fns]
    for x in th:
        x.start()
    for x in th:
        x.join()
    if err:
        sys.exit("serve-turns: " + err[0])
    return time.monotonic() - t0


def cached_of(usage):
    d = (usage or {}).get("prompt_tokens_details") or {}
    return d.get("cached_tokens")


def conversation(args, k, out, lock):
    pad = " ".join(PAD[i % len(PAD)] for i in range(args.pad))
    msgs = [{"role": "system", "content": "You are a patient storyteller. Answer briefly, "
             "in plain words, and keep to the subject the user names in each turn." +
             (" Keep in mind: " + pad if pad else "")}]
    for t in range(args.t):
        msgs.append({"role": "user", "content": "Conversation %d, turn %d: tell me one more "
                     "sentence about %s, and how it connects to what you said before."
                     % (k + 1, t + 1, TOPICS[(t + k) % len(TOPICS)])})
        body = {"messages": msgs, "max_tokens": args.g, "temperature": 0}
        if args.model:
            body["model"] = args.model
        text, usage, ttft, _ = stream(args.url, "/v1/chat/completions", body)
        msgs.append({"role": "assistant", "content": text})
        with lock:
            out.append({"conversation": k, "turn": t + 1,
                        "prompt_tokens": (usage or {}).get("prompt_tokens"),
                        "cached_tokens": cached_of(usage),
                        "ttft_ms": round(ttft * 1e3, 2) if ttft is not None else None,
                        "content": text})


def turns(args):
    out, lock = [], threading.Lock()
    together([lambda k=k: conversation(args, k, out, lock) for k in range(args.c)])
    if len(out) != args.c * args.t:
        sys.exit("serve-turns: %d of %d turns answered" % (len(out), args.c * args.t))
    for r in sorted(out, key=lambda r: (r["conversation"], r["turn"])):
        print(json.dumps(r))


def shared(args):
    rng = random.Random(args.seed)
    sys_ids = [rng.randrange(1, args.vocab) for _ in range(args.p)]
    own = [[rng.randrange(1, args.vocab) for _ in range(args.q)] for _ in range(args.n)]
    todo = list(range(args.n))
    res, lock = [], threading.Lock()

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            body = {"prompt": sys_ids + own[i], "max_tokens": args.g, "temperature": 0,
                    "ignore_eos": True}
            if args.model:
                body["model"] = args.model
            _, usage, ttft, n = stream(args.url, "/v1/completions", body)
            with lock:
                res.append((ttft, n, cached_of(usage)))

    wall = together([worker] * args.c)
    tt = [r[0] * 1e3 for r in res if r[0] is not None]
    cached = [r[2] for r in res if r[2] is not None]
    print(json.dumps({"requests": len(res), "c": args.c, "shared": args.p, "own": args.q,
                      "gen": args.g, "wall_s": round(wall, 3),
                      "agg_tok_s": round(sum(r[1] for r in res) / wall, 2),
                      "ttft_p50_ms": round(pct(tt, 0.5), 2), "ttft_p99_ms": round(pct(tt, 0.99), 2),
                      "cached_tokens": sum(cached) if cached else None}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("mode", choices=["turns", "shared", "idturns"])
    ap.add_argument("-c", type=int, default=None, help="conversations / streams")
    ap.add_argument("-t", type=int, default=8, help="turns a conversation")
    ap.add_argument("-g", type=int, default=None, help="new tokens a turn / request")
    ap.add_argument("-n", type=int, default=64, help="requests (shared)")
    ap.add_argument("-p", type=int, default=2048, help="shared prompt ids")
    ap.add_argument("-q", type=int, default=64, help="each request's own ids")
    ap.add_argument("--pad", type=int, default=0, help="words added to the system prompt (turns)")
    ap.add_argument("--vocab", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default="")
    ap.add_argument("--api", choices=["openai", "llama"], default="openai",
                    help="idturns: memra's /v1/completions or llama-server's /completion")
    ap.add_argument("--turns-log", default="", help="idturns: a JSON line a turn, appended")
    args = ap.parse_args()
    if args.mode == "turns":
        args.c = args.c or 1
        args.g = args.g or 32
        turns(args)
    elif args.mode == "idturns":
        args.c = args.c or 1
        args.g = args.g or 32
        if args.t < 1 or args.p < 1 or args.q < 1 or args.g < 1:
            sys.exit("serve-turns: idturns: -t, -p, -q and -g are at least 1")
        idturns(args)
    else:
        args.c = args.c or 16
        args.g = args.g or 16
        shared(args)


if __name__ == "__main__":
    main()
