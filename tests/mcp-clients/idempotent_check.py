"""Idempotent starts as an agent makes them (the official Python MCP SDK
against `weft serve --stdio`): run_start with `idempotency_key` twice (one
run, the second answer says so), with other input (an isError naming the
first run), a `wf_` tool called twice with the key in `_meta`
(`dev.weft/idempotency-key`, what weft's own tool steps send), and a
per-run `notify` naming a webhook nobody configured (refused with its
path). Used by host/tests/e2e/idempotent.rs. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client

GREET = {"name": "greet", "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}},
         "steps": [{"name": "out", "return": "hi @input.who"}]}


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            start = {"definition": GREET, "input": {"who": "ada"}, "wait_ms": 20000, "idempotency_key": "turn-1"}
            first = await session.call_tool("run_start", start)
            check(not first.is_error, "run_start", text_of(first))
            again = await session.call_tool("run_start", start)
            check(not again.is_error, "run_start again", text_of(again))
            seen["first"], seen["again"] = structured(first), structured(again)
            other = await session.call_tool("run_start", {**start, "input": {"who": "bob"}})
            seen["other"] = {"is_error": bool(other.is_error), "text": text_of(other)}
            r = await session.call_tool("template_save", {"definition": GREET})
            check(not r.is_error, "template_save", text_of(r))
            meta = {"dev.weft/idempotency-key": "step-attempt-7"}
            a = await session.call_tool("wf_greet", {"who": "cy"}, meta=meta)
            b = await session.call_tool("wf_greet", {"who": "cy"}, meta=meta)
            seen["wf"] = [{"is_error": bool(x.is_error), "text": text_of(x), "structured": structured(x)} for x in (a, b)]
            # The same key through run_start naming the template: the same request.
            c = await session.call_tool("run_start", {"template": "greet", "input": {"who": "cy"},
                                                      "idempotency_key": "step-attempt-7", "wait_ms": 10000})
            seen["wf_then_run_start"] = {"is_error": bool(c.is_error), "text": text_of(c), "structured": structured(c)}
            listed = structured(await session.call_tool("run_list", {"template": "greet"}))
            seen["runs"] = listed["runs"]
            bad = await session.call_tool("run_start", {"definition": GREET, "input": {"who": "x"},
                                                        "notify": [{"on": ["completed"], "webhook": "nowhere"}]})
            seen["bad_notify"] = {"is_error": bool(bad.is_error), "text": text_of(bad)}
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    anyio.run(main, ap.parse_args())
