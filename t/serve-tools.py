#!/usr/bin/env python3
"""serve-tools: strict tool calls through the openai client, for t/serve-json.bats.

usage: serve-tools.py BASE_URL MODEL N
  N chat replies at temperature 1 (each its own seed, 8 at a time), streamed
  and not, tool_choice required, named and auto, with three tools: two
  strict (their arguments under their parameters) and one not.  Under
  required and a named tool every reply is a call (finish tool_calls) of a
  tool given (the named one); every call of a strict tool has arguments
  that validate (jsonschema, Draft 2020-12); a call of the other tool has a
  JSON object.  Then the SDK's beta parse with pydantic tools
  (openai.pydantic_function_tool: strict, its arguments parsed).
Prints "N valid" and exits 0, or the first failure and exits 1.
"""
import concurrent.futures
import json
import sys
from typing import List, Optional

import jsonschema
import openai
import pydantic

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string"},
    "days": {"type": "integer"},
    "unit": {"enum": ["c", "f"]},
    "note": {"type": ["string", "null"]},
    "hours": {"type": "array", "items": {"type": "number"}, "maxItems": 3}},
    "required": ["city", "days", "note"], "additionalProperties": False}
LOOKUP = {"type": "object", "properties": {
    "query": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    "filter": {"type": "object", "properties": {"lang": {"type": "string"},
                                                "max": {"type": "integer"}},
               "required": ["lang"], "additionalProperties": False},
    "exact": {"type": "boolean"}},
    "required": ["query", "exact"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "strict": True,
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "lookup", "strict": True,
                                           "parameters": LOOKUP}},
         {"type": "function", "function": {"name": "note_down",
                                           "parameters": {"type": "object"}}}]
SCHEMAS = {"get_weather": WEATHER, "lookup": LOOKUP}
PROMPTS = ["What is the weather in Paris for 3 days?", "Look up 'memra' in English.",
           "Call a tool.", "Note this down: buy milk."]
CHOICES = ["required", {"type": "function", "function": {"name": "lookup"}},
           {"type": "function", "function": {"name": "get_weather"}}, "auto"]


def reply(c, model, i):
    """Reply i: (its finish, its calls as (name, arguments), the tool_choice)."""
    choice = CHOICES[i % len(CHOICES)]
    args = dict(model=model, max_tokens=200, temperature=1.0, seed=2000 + i, tools=TOOLS,
                tool_choice=choice, messages=[{"role": "user", "content": PROMPTS[i % 4]}])
    if i % 3 == 1:
        calls, finish = {}, None
        for ch in c.chat.completions.create(stream=True, **args):
            if not ch.choices:
                continue
            finish = ch.choices[0].finish_reason or finish
            for d in ch.choices[0].delta.tool_calls or []:
                name, a = calls.get(d.index, ("", ""))
                calls[d.index] = (name + (d.function.name or ""), a + (d.function.arguments or ""))
        return finish, [calls[k] for k in sorted(calls)], choice
    m = c.chat.completions.create(**args).choices[0]
    return m.finish_reason, [(t.function.name, t.function.arguments)
                             for t in m.message.tool_calls or []], choice


def check(finish, calls, choice):
    """None when the reply is as it must be, else why not."""
    named = choice["function"]["name"] if isinstance(choice, dict) else None
    if choice != "auto" and (finish != "tool_calls" or not calls):
        return "not a call under %s: finish %s" % (json.dumps(choice), finish)
    for name, a in calls:
        if name not in ("get_weather", "lookup", "note_down") or named not in (None, name):
            return "call of %r under %s" % (name, json.dumps(choice))
        try:
            doc = json.loads(a)
        except ValueError as e:
            return "arguments not JSON (%s): %r" % (e, a)
        if name not in SCHEMAS:
            if not isinstance(doc, dict):
                return "arguments not an object: %r" % a
            continue
        try:
            jsonschema.Draft202012Validator(SCHEMAS[name]).validate(doc)
        except jsonschema.ValidationError as e:
            return "%s's arguments invalid (%s): %r" % (name, e.message, a)
    return None


class Weather(pydantic.BaseModel):
    city: str
    days: int
    hours: List[float]
    note: Optional[str]


def parse(c, model):
    """The SDK's beta parse with a pydantic tool: None, or why not."""
    for seed in range(4):
        r = c.beta.chat.completions.parse(
            model=model, max_tokens=200, temperature=1.0, seed=seed,
            messages=[{"role": "user", "content": PROMPTS[0]}],
            tools=[openai.pydantic_function_tool(Weather)], tool_choice="required")
        calls = r.choices[0].message.tool_calls or []
        if not calls or not isinstance(calls[0].function.parsed_arguments, Weather):
            return "beta parse: no Weather call: %r" % r.choices[0].message
    return None


def main():
    base, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    c = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        for i, r in enumerate(ex.map(lambda i: reply(c, model, i), range(n))):
            why = check(*r)
            if why is not None:
                print("reply %d: %s" % (i, why))
                return 1
    why = parse(c, model)
    if why is not None:
        print(why)
        return 1
    print("%d valid" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
