"""Labels as an agent uses them (the official Python MCP SDK against
`weft serve --stdio`): run_start with `labels` (a step reads them as
`@run.labels.KEY`), run_list filtered by labels, and a label key the caps
refuse (an isError result naming `labels/KEY`). Used by
host/tests/e2e/labels.rs. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client

TAGGED = {"name": "tagged", "steps": [
    {"name": "out", "return": {"origin": "@run.labels.origin", "session": "@run.labels.session"}}]}


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool("run_start", {"definition": TAGGED, "wait_ms": 20000,
                                                      "labels": {"origin": "slack", "session": "s-42"}})
            check(not r.is_error, "run_start", text_of(r))
            seen["run"] = structured(r)
            r = await session.call_tool("run_start", {"definition": TAGGED, "wait_ms": 20000,
                                                      "labels": {"origin": "email", "session": "s-1"}})
            check(not r.is_error, "run_start", text_of(r))
            seen["listed"] = structured(await session.call_tool("run_list", {"labels": {"origin": "slack"}}))
            r = await session.call_tool("run_start", {"definition": TAGGED, "labels": {"bad key": "x"}})
            seen["bad"] = {"is_error": bool(r.is_error), "text": text_of(r)}
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    anyio.run(main, ap.parse_args())
