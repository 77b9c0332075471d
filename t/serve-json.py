#!/usr/bin/env python3
"""serve-json: structured outputs through the openai client, for t/serve-json.bats.

usage: serve-json.py BASE_URL MODEL SCHEMA N
  N replies at temperature 1 (each its own seed, 8 at a time): chat and
  completions, streamed and not, half under response_format json_schema
  (strict) with SCHEMA, half json_object; every reply must parse and, under
  the schema, validate (jsonschema, Draft 2020-12).  Then the openai SDK's
  beta parse with a pydantic model, and a greedy reply twice (the same).
Prints "N valid" and exits 0, or the first failure and exits 1.
"""
import concurrent.futures
import json
import sys

import jsonschema
import openai
import pydantic

PROMPTS = ["Describe a person as JSON.", "Write a JSON record of a friend.",
           "Give me data about someone, in JSON.", "JSON please: a customer."]


def reply(c, model, schema, i):
    """Reply i: its text and the schema it must satisfy (None: any object)."""
    fmt = ({"type": "json_schema", "json_schema": {"name": "rec", "schema": schema, "strict": True}}
           if i % 2 == 0 else {"type": "json_object"})
    stream, chat = i % 4 in (1, 2), i % 8 < 6
    args = dict(model=model, max_tokens=160, temperature=1.0, seed=1000 + i,
                extra_body={"response_format": fmt})
    if chat:
        msgs = [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]
        if stream:
            text = "".join(ch.choices[0].delta.content or "" for ch in
                           c.chat.completions.create(messages=msgs, stream=True, **args) if ch.choices)
        else:
            text = c.chat.completions.create(messages=msgs, **args).choices[0].message.content
    else:
        p = PROMPTS[i % len(PROMPTS)] + "\n"
        if stream:
            text = "".join(ch.choices[0].text for ch in
                           c.completions.create(prompt=p, stream=True, **args) if ch.choices)
        else:
            text = c.completions.create(prompt=p, **args).choices[0].text
    return text, schema if i % 2 == 0 else None


def check(text, schema):
    """None when text is a valid reply, else why not."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        return "not JSON (%s): %r" % (e, text)
    if schema is None:
        return None if isinstance(doc, dict) else "not an object: %r" % text
    try:
        jsonschema.Draft202012Validator(schema).validate(doc)
    except jsonschema.ValidationError as e:
        return "invalid (%s): %r" % (e.message, text)
    return None


class Pet(pydantic.BaseModel):
    kind: str
    legs: int


class Person(pydantic.BaseModel):
    name: str
    age: int
    pets: list[Pet]


def main():
    base, model, schema_file, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(schema_file) as f:
        schema = json.load(f)
    c = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        for i, (text, sch) in enumerate(ex.map(lambda i: reply(c, model, schema, i), range(n))):
            why = check(text, sch)
            if why is not None:
                print("reply %d: %s" % (i, why))
                return 1
    for seed in range(4):
        r = c.beta.chat.completions.parse(model=model, response_format=Person, temperature=1.0,
                                          seed=seed, max_tokens=200,
                                          messages=[{"role": "user", "content": "A person, please."}])
        if not isinstance(r.choices[0].message.parsed, Person):
            print("parse %d: %r" % (seed, r.choices[0].message.content))
            return 1
    greedy = [c.chat.completions.create(model=model, max_tokens=80, temperature=0,
                                        response_format={"type": "json_object"},
                                        messages=[{"role": "user", "content": PROMPTS[0]}])
              .choices[0].message.content for _ in range(2)]
    if greedy[0] != greedy[1] or check(greedy[0], None) is not None:
        print("greedy: %r" % greedy)
        return 1
    print("%d valid" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
