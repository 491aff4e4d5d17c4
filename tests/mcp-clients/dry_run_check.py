"""Another template language's placeholders in a recording: with the
official Python MCP SDK through `weft serve`'s proxy, an echo of
`{{echo_1}}` (a ref to a recorded step written the Mustache way) is
refused when the call is made (not sent, not recorded, the ref to write
named); an echo of `{{greeting}} zoe` (naming nothing weft knows) is
recorded, and `recording_save {dry_run: true}` and the real save say the
same about it. Used by host/tests/e2e/serve_recording.rs. Prints one JSON
object.
"""

from __future__ import annotations

import argparse
import json

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool("recording_start", {"name": "dry", "input": {}})
            check(not r.is_error, "recording_start", text_of(r))
            r = await session.call_tool("everything__echo", {"message": "hello"})
            check(not r.is_error, "echo_1", text_of(r))
            r = await session.call_tool("everything__echo", {"message": "{{echo_1}}"})
            seen["mustache_ref"] = {"is_error": bool(r.is_error), "text": text_of(r)}
            r = await session.call_tool("step_code", {"plugin": "json-select",
                                                      "input": {"data": {"a": "${input.x}"}, "path": "a"}})
            seen["shell_ref"] = {"is_error": bool(r.is_error), "text": text_of(r)}
            r = await session.call_tool("everything__echo", {"message": "{{greeting}} zoe"})
            check(not r.is_error, "echo of a placeholder naming nothing", text_of(r))
            dry = await session.call_tool("recording_save", {"template": "dry", "dry_run": True})
            seen["dry"] = {"is_error": bool(dry.is_error), "structured": structured(dry)}
            real = await session.call_tool("recording_save", {"template": "dry"})
            seen["save"] = {"is_error": bool(real.is_error), "structured": structured(real)}
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    anyio.run(main, ap.parse_args())
