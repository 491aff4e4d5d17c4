"""A run too large to read whole, read by an agent: with the official
Python MCP SDK against `weft serve --stdio`, `run_get` of a run whose
for_each had 20,000 items (its input, output and the step's output are
large) answers under 64 KB and lists what it trimmed; following each
trimmed value's `read_with` call (`run_value`) page by page gives back
every item, in order. Used by host/tests/e2e/serve_limits.rs. Prints one
JSON object.

    bounded_check.py --weft W --config C --data-dir D --run RUN_ID
"""

from __future__ import annotations

import argparse
import json

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client


async def read_all(session: ClientSession, call: dict) -> tuple[list, int, int]:
    """Every item of a trimmed array, page by page; the pages and the largest page's bytes."""
    items: list = []
    args = dict(call["arguments"])
    pages, largest = 0, 0
    while True:
        r = await session.call_tool(call["tool"], args)
        check(not r.is_error, "run_value", text_of(r))
        largest = max(largest, len(r.model_dump_json(by_alias=True, exclude_none=True)))
        page = structured(r)
        check(page["offset"] == len(items), "pages follow each other", {k: page[k] for k in page if k != "value"})
        items.extend(page["value"])
        pages += 1
        if page.get("next_offset") is None:
            check(len(items) == page["total"], "every item read", page["total"])
            return items, pages, largest
        args["offset"] = page["next_offset"]


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool("run_get", {"run_id": args.run})
            check(not r.is_error, "run_get", text_of(r))
            seen["run_get_bytes"] = len(r.model_dump_json(by_alias=True, exclude_none=True))
            run = structured(r)
            seen["state"] = run["state"]
            seen["trimmed"] = run.get("trimmed", [])
            seen["step_output_marker"] = run["steps"][0]["output"]["trimmed"]
            by_at = {t["at"]: t for t in seen["trimmed"]}
            out_items, pages, largest = await read_all(session, by_at["/steps/0/output"]["read_with"])
            seen["step_output"] = out_items
            seen["pages"] = pages
            seen["largest_page_bytes"] = largest
            in_items = await session.call_tool("run_value", {"run_id": args.run, "of": "input", "pointer": "/items/19999/name"})
            seen["one_input_item"] = structured(in_items)["value"]
            # run_start's answer is bounded too: a large output is shown in part, and said so.
            items = [{"n": i, "pad": "x" * 40} for i in range(5000)]
            echo = {"name": "echo-big", "steps": [{"name": "r", "return": "@input.items"}], "output": "@r"}
            r = await session.call_tool("run_start", {"definition": echo, "input": {"items": items}, "wait_ms": 60000})
            check(not r.is_error, "run_start", text_of(r))
            started = structured(r)
            seen["run_start_bytes"] = len(r.model_dump_json(by_alias=True, exclude_none=True))
            seen["run_start_note"] = started["note"]
            seen["run_start_output_length"] = started["output"]["trimmed"]["length"]
            # An item's input, past the tries run_get lists.
            tries = by_at.get("/steps/0/tries")
            seen["tries_marker"] = tries
            r = await session.call_tool("run_value", {"run_id": args.run, "step": "each", "of": "input", "item": 19999})
            check(not r.is_error, "an item's input", text_of(r))
            seen["item_input"] = structured(r)["value"]
            r = await session.call_tool("run_value", {"run_id": args.run, "step": "each", "of": "input"})
            seen["for_each_input"] = {"is_error": bool(r.is_error), "text": text_of(r)}
            bad = await session.call_tool("run_value", {"run_id": args.run, "step": "nope"})
            seen["bad_step"] = {"is_error": bool(bad.is_error), "text": text_of(bad)}
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    ap.add_argument("--run", required=True)
    anyio.run(main, ap.parse_args())
