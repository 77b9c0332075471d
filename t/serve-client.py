#!/usr/bin/env python3
"""serve-client: the openai client against a running serve, for t/serve.bats.

usage: serve-client.py BASE_URL COMMAND [ARGS...]
Prints one result per line; an API error prints "error STATUS MESSAGE".
create / stream print the response (each chunk) as the SDK parsed it, as JSON.
"""
import concurrent.futures
import json
import sys
import threading
import time

import openai


def main():
    base, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    key = "sk-test"
    if cmd == "--key":
        key, cmd, args = args[0], args[1], args[2:]
    c = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
    try:
        if cmd == "models":
            print(" ".join(m.id for m in c.models.list()))
        elif cmd == "chat":  # MODEL TEXT MAX [json extra]
            extra = json.loads(args[3]) if len(args) > 3 else {}
            r = c.chat.completions.create(model=args[0], max_tokens=int(args[2]), temperature=0,
                                          messages=[{"role": "user", "content": args[1]}], **extra)
            m = r.choices[0].message
            print(json.dumps({"content": m.content, "reasoning": getattr(m, "reasoning_content", None),
                              "finish": r.choices[0].finish_reason,
                              "prompt_tokens": r.usage.prompt_tokens,
                              "completion_tokens": r.usage.completion_tokens}))
        elif cmd == "chat-stream":  # MODEL TEXT MAX [json extra]
            extra = json.loads(args[3]) if len(args) > 3 else {}
            s = c.chat.completions.create(model=args[0], max_tokens=int(args[2]), temperature=0,
                                          messages=[{"role": "user", "content": args[1]}], stream=True,
                                          **extra)
            text, finish = "", None
            for ch in s:
                if ch.choices:
                    text += ch.choices[0].delta.content or ""
                    finish = ch.choices[0].finish_reason or finish
            print(json.dumps({"content": text, "finish": finish}))
        elif cmd == "complete":  # MODEL PROMPT MAX
            r = c.completions.create(model=args[0], prompt=args[1], max_tokens=int(args[2]), temperature=0)
            print(json.dumps({"text": r.choices[0].text, "finish": r.choices[0].finish_reason}))
        elif cmd == "parallel":  # N MODEL TEXT MAX: N chats at once, their contents
            n = int(args[0])

            def one(_):
                try:
                    return c.chat.completions.create(
                        model=args[1], max_tokens=int(args[3]), temperature=0,
                        messages=[{"role": "user", "content": args[2]}]).choices[0].message.content
                except openai.APIStatusError as e:
                    return "error %d" % e.status_code
            with concurrent.futures.ThreadPoolExecutor(n) as ex:
                for r in ex.map(one, range(n)):
                    print(json.dumps(r))
        elif cmd in ("staggered", "solo"):  # FILE: JSONL requests, at once after their delays or one by one
            reqs = [json.loads(l) for l in open(args[0])]
            out = [None] * len(reqs)

            def run(i):
                q = dict(reqs[i])
                delay, drop = q.pop("delay", 0), q.pop("drop_after", None)
                if cmd == "staggered":
                    time.sleep(delay)
                try:
                    if drop is not None:  # read a few chunks of a stream, then hang up
                        q["stream"] = True
                        s = c.completions.create(**q)
                        for k, _ in enumerate(s):
                            if k + 1 >= drop:
                                break
                        s.response.close()
                        out[i] = {"dropped": True}
                    elif q.get("stream"):
                        text, fin = "", None
                        for ch in c.completions.create(**q):
                            if ch.choices:
                                text += ch.choices[0].text or ""
                                fin = ch.choices[0].finish_reason or fin
                        out[i] = {"text": text, "finish": fin}
                    else:
                        r = c.completions.create(**q)
                        out[i] = {"text": r.choices[0].text, "finish": r.choices[0].finish_reason,
                                  "tokens": r.usage.completion_tokens}
                except openai.APIStatusError as e:
                    out[i] = {"error": e.status_code}
                except openai.APIError as e:  # no reply at all (a connection reset, a timeout)
                    out[i] = {"error": "%s: %s" % (type(e).__name__, e)}
            if cmd == "solo":
                for i in range(len(reqs)):
                    run(i)
            else:
                ts = [threading.Thread(target=run, args=(i,)) for i in range(len(reqs))]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
            for o in out:
                print(json.dumps(o, sort_keys=True))
        elif cmd in ("create", "stream"):  # chat|completions JSON: the response (each chunk) as the SDK parsed it
            api = c.chat.completions if args[0] == "chat" else c.completions
            q = json.loads(args[1])
            if cmd == "create":
                print(api.create(**q).model_dump_json())
            else:
                for ch in api.create(stream=True, **q):
                    print(ch.model_dump_json())
        else:
            sys.exit("serve-client: unknown command " + cmd)
    except openai.APIStatusError as e:
        print("error %d %s" % (e.status_code, e.body.get("message") if isinstance(e.body, dict) else e.body))


main()
