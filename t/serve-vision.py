#!/usr/bin/env python3
"""serve-vision: images through a running serve with the openai client, for t/serve-vision.bats.

usage: serve-vision.py BASE_URL chat MODEL MAX [--logprobs | --stream | --n N] [--system TEXT]
                           [--sample TEMP SEED] PART...
       serve-vision.py BASE_URL many MODEL MAX SPEC...
       serve-vision.py BASE_URL conv MODEL MAX SPEC...
       serve-vision.py - tokbytes TOKENIZER_JSON ID...

A PART is @FILE (an image: its bytes in a data: URI, image/png or image/jpeg by the
name), url=URL (an image_url part with that URL as it is), or text.  chat sends one
user message of the parts, greedy, and prints one JSON line: content, finish,
prompt_tokens, completion_tokens, cached_tokens, and with --logprobs each token's
bytes (hex); with --stream the reply streamed (with its usage), with --n N the content
of each of N choices as "contents"; --sample draws at temperature TEMP with seed SEED.
many sends each SPEC (parts separated by '|') at once from its own thread and prints
their lines in order.  conv is a conversation: each SPEC a user turn, sent with the
turns before it and the replies to them (each without an image marker's text; greedy,
with logprobs), one line a turn as chat's with each token's logprob ("lp") too.  An API error
prints "error STATUS MESSAGE"; in many, a request that got no reply "error - CLASS: MESSAGE".
tokbytes prints the bytes (hex) of each id of a byte-level BPE vocabulary, as JSON, as
serve's logprobs give them (none for an id the tokenizer lacks).
"""
import base64
import json
import sys
import threading

import openai


def part(p):
    if p.startswith("@"):
        mime = "image/jpeg" if p.endswith((".jpg", ".jpeg")) else "image/png"
        with open(p[1:], "rb") as f:
            data = base64.b64encode(f.read()).decode()
        return {"type": "image_url", "image_url": {"url": "data:%s;base64,%s" % (mime, data)}}
    if p.startswith("url="):
        return {"type": "image_url", "image_url": {"url": p[4:]}}
    return {"type": "text", "text": p}


def streamed(c, model, mx, msgs):
    text, finish, usage = "", None, None
    for ch in c.chat.completions.create(model=model, max_tokens=mx, temperature=0, messages=msgs,
                                        stream=True, stream_options={"include_usage": True}):
        if ch.choices:
            text += ch.choices[0].delta.content or ""
            finish = ch.choices[0].finish_reason or finish
        usage = ch.usage or usage
    return json.dumps({"content": text, "finish": finish, "prompt_tokens": usage.prompt_tokens,
                       "completion_tokens": usage.completion_tokens})


def reply(c, model, mx, msgs, logprobs=False, n=None, sample=None):
    """The reply to msgs as a dict, or an API error as "error STATUS MESSAGE"."""
    temp, seed = sample if sample else (0, None)
    try:
        r = c.chat.completions.create(model=model, max_tokens=mx, temperature=temp, messages=msgs,
                                      **({"seed": seed} if seed is not None else {}),
                                      **({"logprobs": True} if logprobs else {}),
                                      **({"n": n} if n else {}))
    except openai.APIStatusError as e:
        return "error %d %s" % (e.status_code, e.body.get("message") if isinstance(e.body, dict)
                                else e.message)
    if n:
        return {"contents": [ch.message.content for ch in r.choices],
                "prompt_tokens": r.usage.prompt_tokens}
    out = {"content": r.choices[0].message.content, "finish": r.choices[0].finish_reason,
           "prompt_tokens": r.usage.prompt_tokens, "completion_tokens": r.usage.completion_tokens,
           "cached_tokens": r.usage.prompt_tokens_details.cached_tokens}
    if logprobs:
        out["bytes"] = [bytes(t.bytes).hex() for t in r.choices[0].logprobs.content]
        out["lp"] = [t.logprob for t in r.choices[0].logprobs.content]
    return out


def chat(c, model, mx, parts, logprobs=False, system=None, stream=False, n=None, sample=None):
    msgs = ([{"role": "system", "content": system}] if system else []) + \
        [{"role": "user", "content": [part(p) for p in parts]}]
    if stream:
        return streamed(c, model, mx, msgs)
    r = reply(c, model, mx, msgs, logprobs, n, sample)
    if isinstance(r, dict) and logprobs:
        del r["lp"]
    return r if isinstance(r, str) else json.dumps(r)


def conv(c, model, mx, turns):
    msgs, out = [], []
    for t in turns:
        msgs.append({"role": "user", "content": [part(p) for p in t.split("|")]})
        r = reply(c, model, mx, msgs, logprobs=True)
        out.append(r if isinstance(r, str) else json.dumps(r))
        if isinstance(r, str):
            break
        # (a random model may write an image marker: the next turn would count it as an image)
        msgs.append({"role": "assistant", "content": r["content"].replace("<|image|>", "")})
    return "\n".join(out)


def tokbytes(path, ids):
    # GPT-2's bytes_to_unicode, inverted: a byte-level token's characters to its bytes
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b), cs.append(256 + n)
            n += 1
    dec = {chr(c): b for b, c in zip(bs, cs)}
    with open(path) as f:
        t = json.load(f)
    inv = {i: bytes(dec[ch] for ch in s) for s, i in t["model"]["vocab"].items()}
    inv.update({a["id"]: a["content"].encode() for a in t.get("added_tokens", [])})
    # an id past the tokenizer's vocabulary (the model's is larger) has no bytes
    return json.dumps([inv.get(i, b"").hex() for i in ids])


def main():
    base, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if cmd == "tokbytes":
        print(tokbytes(args[0], [int(x) for x in args[1:]]))
        return
    c = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0, timeout=600)
    model, mx, args = args[0], int(args[1]), args[2:]
    if cmd == "chat":
        lp, system, stream, n, sample = False, None, False, None, None
        while args and args[0] in ("--logprobs", "--system", "--stream", "--n", "--sample"):
            if args[0] == "--logprobs":
                lp, args = True, args[1:]
            elif args[0] == "--stream":
                stream, args = True, args[1:]
            elif args[0] == "--n":
                n, args = int(args[1]), args[2:]
            elif args[0] == "--sample":
                sample, args = (float(args[1]), int(args[2])), args[3:]
            else:
                system, args = args[1], args[2:]
        print(chat(c, model, mx, args, lp, system, stream, n, sample))
    elif cmd == "conv":
        print(conv(c, model, mx, args))
    elif cmd == "many":
        out = [None] * len(args)
        go = threading.Barrier(len(args))

        def one(i):
            go.wait()
            try:
                out[i] = chat(c, model, mx, args[i].split("|"))
            except openai.APIError as e:  # no reply at all (a connection reset, a timeout)
                out[i] = "error - %s: %s" % (type(e).__name__, e)
        ts = [threading.Thread(target=one, args=(i,)) for i in range(len(args))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("\n".join(out))
    else:
        sys.exit("serve-vision.py: unknown command '%s'" % cmd)


if __name__ == "__main__":
    main()
