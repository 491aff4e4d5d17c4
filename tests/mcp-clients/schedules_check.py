"""Cron schedules over MCP, with the official Python MCP SDK against
`weft serve --stdio` (which owns the store and fires them): a bad cron
and an input the template's input_schema refuses are isError results
naming the argument; a schedule every second starts runs; paused, it
starts none; resumed, it starts runs again; removed twice, the second
removal names schedule_list. Used by host/tests/e2e/schedules.rs.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client

TEMPLATE = {
    "name": "tick",
    "input_schema": {"type": "object", "required": ["who"], "properties": {"who": {"type": "string"}}},
    "steps": [{"name": "say", "code": {"plugin": "text-template"},
               "input": {"template": "hi {{who}}", "values": {"who": "@input.who"}}}],
    "output": "@say",
}


async def runs_of_tick(session: ClientSession) -> int:
    r = await session.call_tool("run_list", {"template": "tick", "limit": 500})
    check(not r.is_error, "run_list", text_of(r))
    return len(structured(r)["runs"])


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = {t.name for t in (await session.list_tools()).tools}
            seen["tools"] = sorted(n for n in listed if n.startswith("schedule_"))
            r = await session.call_tool("template_save", {"definition": TEMPLATE})
            check(not r.is_error, "template_save", text_of(r))

            bad_cron = await session.call_tool("schedule_add", {"template": "tick", "cron": "0 25 * * *",
                                                                "input": {"who": "a"}})
            seen["bad_cron"] = {"is_error": bool(bad_cron.is_error), "text": text_of(bad_cron),
                                "structured": structured(bad_cron)}
            bad_input = await session.call_tool("schedule_add", {"template": "tick", "cron": "* * * * * *",
                                                                 "input": {"who": 5}})
            seen["bad_input"] = {"is_error": bool(bad_input.is_error), "text": text_of(bad_input),
                                 "structured": structured(bad_input)}
            r = await session.call_tool("schedule_list", {})
            seen["listed_after_refusals"] = structured(r)["schedules"]

            added = await session.call_tool("schedule_add", {"template": "tick", "cron": "* * * * * *",
                                                             "input": {"who": "cron"}})
            check(not added.is_error, "schedule_add", text_of(added))
            seen["added"] = structured(added)
            for _ in range(100):
                if await runs_of_tick(session) >= 2:
                    break
                await anyio.sleep(0.1)
            seen["fired"] = await runs_of_tick(session)

            paused = await session.call_tool("schedule_pause", {"name": "tick"})
            check(not paused.is_error, "schedule_pause", text_of(paused))
            seen["paused"] = structured(paused)
            at_pause = await runs_of_tick(session)
            await anyio.sleep(3)
            seen["while_paused"] = await runs_of_tick(session) - at_pause

            resumed = await session.call_tool("schedule_pause", {"name": "tick", "paused": False})
            check(not resumed.is_error, "resume", text_of(resumed))
            seen["resumed"] = structured(resumed)
            at_resume = await runs_of_tick(session)
            for _ in range(100):
                if await runs_of_tick(session) > at_resume:
                    break
                await anyio.sleep(0.1)
            seen["after_resume"] = await runs_of_tick(session) - at_resume

            removed = await session.call_tool("schedule_remove", {"name": "tick"})
            seen["removed"] = {"is_error": bool(removed.is_error), "structured": structured(removed)}
            again = await session.call_tool("schedule_remove", {"name": "tick"})
            seen["removed_again"] = {"is_error": bool(again.is_error), "text": text_of(again)}
            r = await session.call_tool("schedule_list", {})
            seen["listed_at_end"] = structured(r)["schedules"]
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    anyio.run(main, ap.parse_args())
