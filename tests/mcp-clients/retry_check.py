"""Retry from failure as an MCP client meets it (the official Python MCP
SDK against `weft serve --stdio`): a run fails, run_retry with new input
keeps the step that succeeded and completes; the note says what was kept;
a retry naming no step of the run is an isError naming its steps. Used by
host/tests/e2e/retry.rs. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client

FLAKY = {"name": "flaky", "steps": [
    {"name": "a", "code": {"plugin": "text-template"}, "input": {"template": "A {{x}}", "values": {"x": "@input.x"}}},
    {"name": "b", "after": ["a"], "code": {"plugin": "json-select"}, "input": {"data": "@input.data", "path": "v"}},
    {"name": "c", "return": {"a": "@a.text", "b": "@b"}}]}
# (`b` waits for `a`: a failure of `b` never cancels `a` half-way.)


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            seen["described"] = tools["run_retry"].description
            r = await session.call_tool("run_start", {"definition": FLAKY, "wait_ms": 20000,
                                                      "input": {"x": "1", "data": "not an object"}})
            first = structured(r)
            check(first["state"] == "failed", "the first run fails", first)
            retry = await session.call_tool("run_retry", {"run_id": first["run_id"], "wait_ms": 20000,
                                                          "input": {"x": "1", "data": {"v": 7}}})
            check(not retry.is_error, "run_retry", text_of(retry))
            seen["retry"] = structured(retry)
            run = structured(await session.call_tool("run_get", {"run_id": seen["retry"]["run_id"]}))
            seen["labels"] = run["labels"]
            bad = await session.call_tool("run_retry", {"run_id": first["run_id"], "from": "nope"})
            seen["bad"] = {"is_error": bool(bad.is_error), "text": text_of(bad)}
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    anyio.run(main, ap.parse_args())
