"""Filtering and counting a list, as an agent asked for it ("keep orders
over 10, echo each, return the count"): with the official Python MCP SDK
against `weft serve --stdio` and the real server-everything, one
definition parses a CSV, echoes only the orders over 10 (`for_each` +
`where`) and counts them with the bundled `jq` plugin, and counts them a
second way in one `jq` step. A filter with a typo fails pointing into the
filter; `where` without `for_each` is refused at validation. Used by
host/tests/e2e/conditions.rs. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client

CSV = "id,qty\na,4\nb,12.5\nc,30\nd,10\n"

DEFINITION = {
    "name": "big-orders",
    "steps": [
        {"name": "parse", "code": {"plugin": "csv-to-json"}, "input": {"csv": "@input.csv", "infer_types": False}},
        {"name": "echo_each", "for_each": "@parse.rows", "where": {"ref": "@item.qty", "gt": 10},
         "tool": {"server": "everything", "name": "echo"}, "input": {"message": "order @item.id"}},
        {"name": "count", "code": {"plugin": "jq"}, "input": {"data": "@echo_each", "filter": "length"}},
        {"name": "big", "code": {"plugin": "jq"},
         "input": {"data": "@parse.rows", "filter": "map(select((.qty | tonumber) > 10)) | length"}},
    ],
    "output": {"count": "@count", "big": "@big", "echoed": "@echo_each"},
}


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            plugins = structured(await session.call_tool("plugin_list", {}))["plugins"]
            seen["plugins"] = [p["name"] for p in plugins]
            r = await session.call_tool("run_start", {"definition": DEFINITION, "input": {"csv": CSV},
                                                      "wait_ms": 60000})
            check(not r.is_error, "run_start", text_of(r))
            seen["run"] = structured(r)
            typo = json.loads(json.dumps(DEFINITION))
            typo["steps"][3]["input"]["filter"] = "map(selekt(.qty > 10)) | length"
            r = await session.call_tool("run_start", {"definition": typo, "input": {"csv": CSV}, "wait_ms": 60000})
            seen["typo"] = {"is_error": bool(r.is_error), "structured": structured(r), "text": text_of(r)}
            lost = {"name": "lost", "steps": [{"name": "a", "code": {"plugin": "jq"},
                                               "input": {"data": [1], "filter": "length"},
                                               "where": {"ref": "@item", "gt": 1}}]}
            r = await session.call_tool("workflow_validate", {"definition": lost})
            seen["where_alone"] = structured(r)
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    anyio.run(main, ap.parse_args())
