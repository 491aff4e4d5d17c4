"""`for_each` on `wait` and `workflow` steps, as an agent meets them: with
the official Python MCP SDK against `weft serve --stdio` and the real
server-everything, a run waits once per order (each with its own prompt,
listed in `waits` with its `item`), the agent answers the items one by one
and out of order with run_signal {item}, then one child run per order
echoes it. A signal without `item`, with an item the step does not have,
or to an item answered before is refused and says why; `for_each` on a
`sleep` is refused at validation, and a ref to an input field the
input_schema does not list is a warning. Used by host/tests/e2e/waits.rs. Prints
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client

ECHO_ONE = {
    "name": "echo-one",
    "input_schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
    "steps": [{"name": "say", "tool": {"server": "everything", "name": "echo"}, "input": {"message": "ship @input.id"}}],
    "output": "@say",
}

SHIP_EACH = {
    "name": "ship-each",
    "steps": [
        {"name": "approve", "for_each": "@input.orders",
         "wait": {"prompt": "Ship order @item.id (@item.qty units)?",
                  "schema": {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}}},
        {"name": "ship", "for_each": "@input.orders", "after": ["approve"],
         "workflow": {"template": "echo-one"}, "input": {"id": "@item.id"}},
    ],
    "output": {"answers": "@approve", "shipped": "@ship"},
}

ORDERS = [{"id": "a", "qty": 1}, {"id": "b", "qty": 2}, {"id": "c", "qty": 3}]


def refusal(r) -> dict:
    return {"is_error": bool(r.is_error), "structured": structured(r), "text": text_of(r)}


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool("template_save", {"definition": ECHO_ONE})
            check(not r.is_error, "template_save", text_of(r))
            r = await session.call_tool("run_start", {"definition": SHIP_EACH, "input": {"orders": ORDERS},
                                                      "wait_ms": 10000})
            check(not r.is_error, "run_start", text_of(r))
            started = structured(r)
            seen["started"] = started
            run_id = started["run_id"]
            sig = lambda extra: session.call_tool("run_signal", {"run_id": run_id, "step": "approve", **extra})
            seen["no_item"] = refusal(await sig({"data": {"ok": True}}))
            seen["no_such_item"] = refusal(await sig({"item": 7, "data": {"ok": True}}))
            answers = {}
            for k, ok in [(2, True), (0, False)]:
                r = await sig({"item": k, "data": {"ok": ok}})
                check(not r.is_error, f"run_signal item {k}", text_of(r))
                answers[k] = structured(r)
            seen["answers"] = answers
            seen["again"] = refusal(await sig({"item": 2, "data": {"ok": False}}))
            r = await session.call_tool("run_get", {"run_id": run_id})
            seen["waiting"] = structured(r)["waits"]
            r = await sig({"item": 1, "data": {"ok": True}})
            check(not r.is_error, "run_signal item 1", text_of(r))
            seen["last"] = structured(r)
            deadline = time.monotonic() + 60
            while True:
                run = structured(await session.call_tool("run_get", {"run_id": run_id}))
                if run["state"] in ("completed", "failed", "canceled") or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.2)
            seen["run"] = run
            sleepy = {"name": "sleepy", "steps": [{"name": "nap", "for_each": [1, 2], "sleep": {"ms": 10}}]}
            seen["sleep_each"] = structured(await session.call_tool("workflow_validate", {"definition": sleepy}))
            typo = {"name": "typo", "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
                    "steps": [{"name": "hi", "return": {"greeting": "hello @input.nmae"}}]}
            seen["typo"] = structured(await session.call_tool("workflow_validate", {"definition": typo}))
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    anyio.run(main, ap.parse_args())
