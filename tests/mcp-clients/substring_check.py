"""An input value inside a longer string follows the new input: with the
official Python MCP SDK through `weft serve`'s proxy (server-everything),
a recording whose input is {"name": "zoe"} gets an image (its result's
`_meta` says what `@get_tiny_image_1` will be: the image as an artifact)
and echoes "hello zoe, welcome";
`recording_save` proposes the text with the ref in it, and the replay with
another name says the new name. Used by host/tests/e2e/serve_recording.rs.
Prints one JSON object.
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
            r = await session.call_tool("recording_start", {"name": "greet", "input": {"name": "zoe"}})
            check(not r.is_error, "recording_start", text_of(r))
            # What `@step` will be, beside what the agent sees: the image as an artifact.
            r = await session.call_tool("everything__get-tiny-image", {})
            check(not r.is_error, "get-tiny-image", text_of(r))
            meta = r.meta if isinstance(r.meta, dict) else dict(r.meta or {})
            seen["image_meta"] = meta
            r = await session.call_tool("everything__echo", {"message": "hello zoe, welcome"})
            check(not r.is_error, "echo", text_of(r))
            saved = await session.call_tool("recording_save", {"template": "greet"})
            check(not saved.is_error, "recording_save", text_of(saved))
            seen["saved"] = structured(saved)
            replay = await session.call_tool("wf_greet", {"name": "ann"})
            check(not replay.is_error, "replay", text_of(replay))
            seen["replay"] = structured(replay)
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    anyio.run(main, ap.parse_args())
