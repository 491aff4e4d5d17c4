"""An agent step that asks, as an MCP client meets it (the official Python
MCP SDK against `weft serve --stdio`, with the a2a-sdk remote agent of
tests/a2a/remote_agent.py configured as `upper`): the guide names the
configured agents, tools/list's steps mention `agent`, a run whose remote
agent asks is `input-required` with the question in `waits`, the answer's
reply says it went on to the agent, an answer between two questions is
refused with advice to wait, and the second answer completes the run.
Used by host/tests/e2e/a2a_steps.rs. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client

ASKS = {"name": "asks", "steps": [{"name": "call", "agent": "upper", "input": "@input"}],
        "output": {"upper": "@call.data.upper"}}


async def waits_of(session: ClientSession, run_id: str, want: str) -> dict:
    """run_get until the run is in state `want`."""
    for _ in range(400):
        run = structured(await session.call_tool("run_get", {"run_id": run_id}))
        if run["state"] == want:
            return run
        await anyio.sleep(0.05)
    raise AssertionError(f"run {run_id} never became {want}: {json.dumps(run)[:2000]}")


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            guide = (await session.read_resource("weft://guide")).contents[0].text
            seen["guide_agents"] = guide[guide.index("## On this server"):].strip()
            tools = (await session.list_tools()).tools
            start = next(t for t in tools if t.name == "run_start")
            seen["steps_doc"] = json.dumps(start.input_schema)
            r = await session.call_tool("run_start", {"definition": ASKS, "wait_ms": 20000,
                                                      "input": {"ask": "which city?", "then": "which year?"}})
            check(not r.is_error, "run_start", text_of(r))
            run = structured(r)
            check(run["state"] == "input-required", "the run asks", run)
            seen["first_wait"] = run["waits"][0]
            run_id = run["run_id"]
            # The remote agent works 1 s on this answer before it asks again.
            answer = {"city": "nice", "sleep": 1}
            a = await session.call_tool("run_signal", {"run_id": run_id, "step": "call", "data": answer})
            check(not a.is_error, "run_signal", text_of(a))
            seen["answered"] = structured(a)
            # Meanwhile the step does not ask: an answer now is refused,
            # with advice to wait for the next question.
            early = await session.call_tool("run_signal", {"run_id": run_id, "step": "call", "data": "x"})
            seen["early"] = {"is_error": bool(early.is_error), "structured": structured(early)}
            run = await waits_of(session, run_id, "input-required")
            seen["second_wait"] = run["waits"][0]
            b = await session.call_tool("run_signal", {"run_id": run_id, "step": "call", "data": "2001"})
            check(not b.is_error, "run_signal 2", text_of(b))
            run = await waits_of(session, run_id, "completed")
            seen["output"] = run["output"]
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    anyio.run(main, ap.parse_args())
