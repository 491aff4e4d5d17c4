"""An LLM's write-then-read, recorded through `weft serve`'s proxy with the
official Python MCP SDK (`ClientSession`): server-filesystem's `write_file`
of `@input.fname`, then its `read_text_file` of the same file (they share
only an input, no data passes). The save must keep the read after the
write (the read tool is annotated read-only, the write is not) and say
so in `order`; a replay with a new file name and text reads what it
wrote.

Used by host/tests/e2e/serve_recording.rs. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os

import anyio
from agent_common import check, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client


async def main(args: argparse.Namespace) -> None:
    seen: dict = {}
    first = os.path.join(args.out_dir, "first.txt")
    async with stdio_client(stdio_server(args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool(
                "recording_start", {"name": "note", "input": {"fname": first, "text": "first note"}}
            )
            check(not r.is_error, "recording_start", text_of(r))
            r = await session.call_tool("fs__write_file", {"path": "@input.fname", "content": "@input.text"})
            check(not r.is_error, "write_file", text_of(r))
            r = await session.call_tool("fs__read_text_file", {"path": "@input.fname"})
            check(not r.is_error and "first note" in text_of(r), "read_text_file", text_of(r))
            r = await session.call_tool("recording_save", {"template": "note-file"})
            check(not r.is_error, "save", text_of(r))
            saved = structured(r)
            seen["order"] = saved["order"]
            seen["definition"] = saved["definition"]
            second = os.path.join(args.out_dir, "second.txt")
            r = await session.call_tool("wf_note-file", {"fname": second, "text": "second note"})
            check(not r.is_error, "replay", text_of(r))
            replay = structured(r)
            seen["replay"] = {"state": replay["state"], "output": replay.get("output")}
            with open(second) as f:
                seen["replay"]["file"] = f.read()
    print(json.dumps(seen, default=str))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    ap.add_argument("--out-dir", required=True)
    anyio.run(main, ap.parse_args())
