#!/usr/bin/env python3
"""chat-render.py TEMPLATE [CONTEXT.json]: render a chat template with jinja2
exactly as transformers' apply_chat_template does (the reference that
t/chat.bats compares lib/chat against).

The environment mirrors transformers.utils.chat_template_utils:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[AssistantTracker, loopcontrols]), tojson = json.dumps with
ensure_ascii=False, and the globals raise_exception and strftime_now.
render() gets messages, tools=None, documents=None, add_generation_prompt
(default False) and every other member of the context as keyword arguments.
Output goes to stdout byte for byte; an error prints to stderr, exit 1.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    """{% generation %}...{% endgeneration %} renders its body (no masks)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write("usage: chat-render.py template [context.json]\n")
        return 2
    with open(sys.argv[1], encoding="utf-8", newline="") as f:
        source = f.read()
    ctxf = sys.argv[2] if len(sys.argv) == 3 and sys.argv[2] != "-" else None
    ctx = json.load(open(ctxf, encoding="utf-8") if ctxf else sys.stdin)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    kwargs = {"tools": None, "documents": None, "add_generation_prompt": False}
    kwargs.update(ctx)
    try:
        out = env.from_string(source).render(**kwargs)
    except Exception as e:  # the test only compares failure, not the message
        sys.stderr.write("chat-render.py: %s: %s\n" % (type(e).__name__, e))
        return 1
    sys.stdout.buffer.write(out.encode("utf-8", "surrogatepass"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
