#!/usr/bin/env python3
"""serve-conv: a multi-turn chat with the openai client, for t/serve-cache.bats.

usage: serve-conv.py BASE_URL MODEL TURNS MAX
Each turn sends the whole conversation so far and a new user message
(temperature 0, MAX new tokens) and prints one JSON line: the reply's
content, its prompt_tokens and usage.prompt_tokens_details.cached_tokens.
"""
import json
import sys

import openai

TOPICS = ["the sea", "a lighthouse keeper", "winter birds", "an old clock", "the river at night",
          "a market in spring", "the last train", "a garden after rain"]


def main():
    base, model, turns, mx = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    c = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    msgs = [{"role": "system", "content": "You are a patient storyteller. Answer briefly, "
             "in plain words, and keep to the subject the user names in each turn."}]
    for t in range(turns):
        msgs.append({"role": "user", "content": "Turn %d: tell me one more sentence about %s, "
                     "and how it connects to what you said before." % (t + 1, TOPICS[t % len(TOPICS)])})
        r = c.chat.completions.create(model=model, messages=msgs, max_tokens=mx, temperature=0)
        text = r.choices[0].message.content or ""
        d = r.usage.prompt_tokens_details
        print(json.dumps({"content": text, "prompt_tokens": r.usage.prompt_tokens,
                          "cached_tokens": d.cached_tokens if d is not None else None}))
        msgs.append({"role": "assistant", "content": text})


if __name__ == "__main__":
    main()
