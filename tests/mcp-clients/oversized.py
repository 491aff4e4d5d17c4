"""Sends `weft serve` an MCP message over the cap of one message with the
official Python MCP SDK (`ClientSession`, 2025-11-25), over stdio or
streamable HTTP, and checks that it is answered — an error naming the cap,
not silence — and that the session still works after it.

Used by host/tests/e2e/serve_limits.rs; runnable by hand too:

    python oversized.py --stdio target/debug/weft --data-dir /tmp/d --mib 20
    python oversized.py --url http://127.0.0.1:7777/mcp --mib 20

Prints one JSON object: {"code", "message", "seconds", "tools_after",
"signal_after"}. Exits non-zero when the big call is not answered within
60 s (the bug this guards against: the client waited forever).
"""

from __future__ import annotations

import argparse
import json
import time

import anyio
import httpx2
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def main(args: argparse.Namespace) -> None:
    if args.stdio:
        env = {"WEFT_DATA_DIR": args.data_dir, "NO_COLOR": "1"}
        params = StdioServerParameters(command=args.stdio, args=["serve", "--stdio"], env=env, cwd=args.data_dir)
        transport = stdio_client(params)
    else:
        transport = streamable_http_client(args.url, http_client=httpx2.AsyncClient(timeout=120))
    report: dict = {}
    async with transport as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            big = "x" * (args.mib << 20)
            started = time.monotonic()
            with anyio.fail_after(60):
                try:
                    r = await session.call_tool("event_emit", {"event": "big", "data": {"blob": big}})
                    report["code"] = None
                    report["message"] = "answered with a result: " + json.dumps(r.model_dump(mode="json"))[:300]
                except MCPError as e:
                    report["code"] = e.error.code
                    report["message"] = e.error.message
            report["seconds"] = round(time.monotonic() - started, 2)
            # The session is still usable.
            tools = await session.list_tools()
            report["tools_after"] = len(tools.tools)
            r = await session.call_tool("event_emit", {"event": "small", "data": {"n": 1}})
            report["signal_after"] = not r.is_error
    print(json.dumps(report))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--stdio")
    ap.add_argument("--data-dir")
    ap.add_argument("--url")
    ap.add_argument("--mib", type=int, default=20)
    anyio.run(main, ap.parse_args())
