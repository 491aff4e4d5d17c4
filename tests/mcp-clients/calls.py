"""Calls `weft serve`'s tools over streamable HTTP with the official Python
MCP SDK (`mcp.Client`, mode auto) and prints what each call returned.

Used by host/tests/e2e/client_paths.rs; runnable by hand too:

    python calls.py --url http://127.0.0.1:7777/mcp --calls '[["run_start", {...}], ...]'

Prints one JSON array: for each call `{"is_error": bool, "text": str,
"structured": object|null}`. Exits non-zero only when the client itself
fails (a tool error is a result, not a failure).
"""

from __future__ import annotations

import argparse
import json

import anyio
import httpx2
import mcp
from mcp.client.streamable_http import streamable_http_client


async def main(args: argparse.Namespace) -> None:
    calls = json.loads(args.calls)
    out = []
    server = streamable_http_client(args.url, http_client=httpx2.AsyncClient(timeout=60))
    async with mcp.Client(server, mode="auto") as client:
        for name, arguments in calls:
            r = await client.call_tool(name, arguments)
            text = "\n".join(getattr(c, "text", "") for c in r.content)
            out.append({"is_error": bool(r.is_error), "text": text, "structured": r.structured_content})
    print(json.dumps(out))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--calls", required=True)
    anyio.run(main, ap.parse_args())
