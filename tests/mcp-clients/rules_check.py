"""Edges and joins as an agent meets them (the official Python MCP SDK
against `weft serve --stdio`, bundled plugins only): a run whose edge
follows a skip, an edge with a false `when` (its step is skipped, and the
skip does not cascade) and a `join: any` that outlives a failed branch;
workflow_validate refuses an edge `when` that reads a step the edge's step
does not depend on, at its path; a run waiting for a nested-match event
says so and takes it; a `?` after a ref inside a text is a warning. Used by
host/tests/e2e/edges.rs. Prints
one JSON object.
"""

from __future__ import annotations

import argparse
import json

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client


def says(name: str, v: str, **extra) -> dict:
    return {"name": name, "code": {"plugin": "json-select"}, "input": {"data": {"v": v}, "path": "v"}, **extra}


RULES = {
    "name": "rules",
    "steps": [
        says("check", "big", when={"ref": "@input.n", "gt": 10}),
        says("fallback", "small", after=[{"step": "check", "on": "skipped"}]),
        says("loud", "loud", after=[{"step": "check", "when": {"ref": "@check", "eq": "big"}}]),
        {"name": "flaky", "code": {"plugin": "json-select"}, "input": {"data": {"a": 1}, "path": "nope"}},
        says("either", "went on", join="any", after=["flaky", "fallback"]),
        {"name": "out", "return": {"fallback": "@fallback", "loud": "@loud", "either": "@either"},
         "after": [{"step": s, "on": "always"} for s in ["either", "loud", "flaky"]]},
    ],
}


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool("run_start", {"definition": RULES, "input": {"n": 3}, "wait_ms": 30000})
            check(not r.is_error, "run_start", text_of(r))
            seen["run"] = structured(r)
            seen["got"] = structured(await session.call_tool("run_get", {"run_id": seen["run"]["run_id"]}))
            wrong = {"name": "wrong", "steps": [
                says("a", "1"), says("b", "2"),
                says("c", "3", after=[{"step": "a", "when": {"ref": "@b", "eq": "2"}}])]}
            seen["wrong"] = structured(await session.call_tool("workflow_validate", {"definition": wrong}))
            reply = {"name": "reply", "steps": [
                {"name": "answer", "wait": {"event": "chat", "match": {"raw": {"to": "m1"}}}}]}
            r = await session.call_tool("run_start", {"definition": reply, "wait_ms": 500})
            seen["event_wait"] = structured(r)
            r = await session.call_tool("event_emit", {"event": "chat", "data": {"raw": {"to": "m1", "guild": "g"}}})
            seen["emitted"] = structured(r)
            optional = {"name": "optional", "steps": [{"name": "a", "return": "id @input.x? here"}]}
            seen["optional"] = structured(await session.call_tool("workflow_validate", {"definition": optional}))
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    anyio.run(main, ap.parse_args())
