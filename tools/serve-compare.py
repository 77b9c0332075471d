#!/usr/bin/env python3
"""serve-compare: the same requests to two servers, the replies compared.

usage: serve-compare.py URL_A URL_B [--model NAME] [--schema FILE] [--tol T]

Sends a fixed set of requests (greedy and seeded-sampled; chat and
completions; response_format json_object and json_schema (strict, --schema,
default t/data/json-schema/person.json); a strict tool; logprobs with
top_logprobs 5; n = 3 seeded choices) to both servers, one at a time, and
compares each reply: every choice's text / tool calls (but their ids) and
finish_reason byte for byte, and each token's logprob and its top alternatives (the same
tokens; the values within --tol, default 1e-3: two backends' logits agree
to their float order, not bit for bit).  One line a request (SAME or DIFF
and why), then "N of M same"; exit 0 when all are.  Standard library only:
runs on the device, for serve on cuda against serve on the CPU (issue 24:
the structured-output and logprobs paths give the CPU's results).
"""
import argparse
import http.client
import json
import os
import sys
import urllib.parse

TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.", "strict": True,
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}


def requests(schema):
    chat = [{"role": "user", "content": "Describe a person as JSON."}]
    fmt_s = {"type": "json_schema", "json_schema": {"name": "rec", "schema": schema, "strict": True}}
    out = []
    for name, temp, seed in (("greedy", 0, None), ("sampled", 0.8, 7)):
        s = {} if seed is None else {"seed": seed}
        out += [
            (name + " chat", "/v1/chat/completions",
             dict(messages=[{"role": "user", "content": "Tell me about the sea."}],
                  max_tokens=48, temperature=temp, **s)),
            (name + " completion", "/v1/completions",
             dict(prompt="The capital of France is", max_tokens=32, temperature=temp, **s)),
            (name + " json_object", "/v1/chat/completions",
             dict(messages=chat, max_tokens=96, temperature=temp,
                  response_format={"type": "json_object"}, **s)),
            (name + " json_schema", "/v1/chat/completions",
             dict(messages=chat, max_tokens=128, temperature=temp, response_format=fmt_s, **s)),
            (name + " strict tool", "/v1/chat/completions",
             dict(messages=[{"role": "user", "content": "What is the weather in Paris?"}],
                  tools=[TOOL], tool_choice="required", max_tokens=96, temperature=temp, **s)),
            (name + " logprobs", "/v1/chat/completions",
             dict(messages=[{"role": "user", "content": "Count to five."}], max_tokens=24,
                  temperature=temp, logprobs=True, top_logprobs=5, **s)),
            (name + " completion logprobs", "/v1/completions",
             dict(prompt="One, two, three,", max_tokens=16, temperature=temp, logprobs=5, **s)),
        ]
    out.append(("n=3 seeded", "/v1/chat/completions",
                dict(messages=[{"role": "user", "content": "Name a colour."}], max_tokens=16,
                     temperature=1.0, seed=11, n=3)))
    return out


def post(url, path, body):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, data[:200]))
    return json.loads(data)


def lp_rows(ch):
    """A choice's logprobs as [(token, logprob, [(alt, logprob)...])...]."""
    lp = ch.get("logprobs")
    if not lp:
        return []
    if "content" in lp:  # chat
        return [(t["token"], t["logprob"], [(a["token"], a["logprob"]) for a in t.get("top_logprobs", [])])
                for t in lp["content"] or []]
    return [(t, v, sorted((top or {}).items())) for t, v, top in  # completions
            zip(lp.get("tokens", []), lp.get("token_logprobs", []), lp.get("top_logprobs") or [])]


def plain(v):
    """A message without its tool calls' ids (a server's own counter)."""
    if isinstance(v, dict) and v.get("tool_calls"):
        v = dict(v, tool_calls=[{k: c[k] for k in c if k != "id"} for c in v["tool_calls"]])
    return v


def compare(a, b, tol):
    ca, cb = a["choices"], b["choices"]
    if len(ca) != len(cb):
        return "%d choices against %d" % (len(ca), len(cb))
    for x, y in zip(ca, cb):
        for k in ("text", "message", "finish_reason"):
            if json.dumps(plain(x.get(k)), sort_keys=True) != json.dumps(plain(y.get(k)),
                                                                          sort_keys=True):
                return "choice %d: %s differs: %r against %r" % (x.get("index", 0), k,
                                                                 x.get(k), y.get(k))
        la, lb = lp_rows(x), lp_rows(y)
        if len(la) != len(lb):
            return "choice %d: %d logprob rows against %d" % (x.get("index", 0), len(la), len(lb))
        for i, ((ta, va, aa), (tb, vb, ab)) in enumerate(zip(la, lb)):
            if ta != tb or abs(va - vb) > tol:
                return "token %d: %r %.6g against %r %.6g" % (i, ta, va, tb, vb)
            if [t for t, _ in aa] != [t for t, _ in ab]:
                return "token %d: top alternatives %r against %r" % (i, aa, ab)
            if any(abs(p - q) > tol for (_, p), (_, q) in zip(aa, ab)):
                return "token %d: an alternative's logprob past %g" % (i, tol)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--model", default="")
    ap.add_argument("--schema", default=os.path.join(os.path.dirname(__file__), "..", "t", "data",
                                                     "json-schema", "person.json"))
    ap.add_argument("--tol", type=float, default=1e-3)
    args = ap.parse_args()
    with open(args.schema) as f:
        schema = json.load(f)
    same = 0
    reqs = requests(schema)
    for name, path, body in reqs:
        if args.model:
            body["model"] = args.model
        try:
            why = compare(post(args.a, path, body), post(args.b, path, body), args.tol)
        except (OSError, RuntimeError, ValueError) as e:
            why = "request failed: %s" % e
        print("%-28s %s" % (name, "SAME" if why is None else "DIFF: " + why))
        same += why is None
    print("%d of %d same" % (same, len(reqs)))
    sys.exit(0 if same == len(reqs) else 1)


if __name__ == "__main__":
    main()
