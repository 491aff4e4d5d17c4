"""Checks `weft serve`'s proxy with the official Python MCP SDK
(`ClientSession`, 2025-11-25) over stdio:

- every configured upstream's tools are listed as `<server>__<tool>`, and
  an upstream that cannot start hides none of the others;
- progress notifications of an upstream tool reach the caller's progress
  callback;
- a caller's timeout cancels the call upstream (the chaos server logs the
  `notifications/cancelled` it receives; the Rust side checks the log);
- an upstream `isError` result comes back as an `isError` result, and a
  call to a server that cannot start is an `isError` result naming it;
- `resources/subscribe` to a run sends `notifications/resources/updated`
  as it runs, up to its end.

    python proxy_check.py --weft target/debug/weft --config weft.toml --data-dir D

The weft.toml must configure `everything` (server-everything), `chaos`
(chaos_server.py) and `broken` (a command that does not exist).
Prints one JSON object on stdout; a failed check raises.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def check(cond: bool, what: str, seen: Any = None) -> None:
    if not cond:
        raise AssertionError(f"{what}: {json.dumps(seen, default=str)[:2000]}")


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def main(args: argparse.Namespace) -> None:
    env = {"WEFT_DATA_DIR": args.data_dir, "WEFT_CONFIG": args.config, "NO_COLOR": "1"}
    server = StdioServerParameters(command=args.weft, args=["serve", "--stdio"], env=env, cwd=args.data_dir)
    seen: dict[str, Any] = {}
    updated: list[str] = []

    async def on_message(msg: Any) -> None:
        root = getattr(msg, "root", msg)
        if getattr(root, "method", None) == "notifications/resources/updated":
            updated.append(str(root.params.uri))

    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            names = sorted(t.name for t in (await session.list_tools()).tools)
            check("everything__echo" in names and "chaos__slow" in names, "both upstreams listed", names)
            check(not any(n.startswith("broken__") for n in names), "the broken upstream lists nothing", names)
            check("run_start" in names, "weft's own tools too", names)
            seen["tools"] = len(names)

            progress: list[float] = []

            async def on_progress(p: float, total: float | None, message: str | None) -> None:
                progress.append(p)

            r = await session.call_tool(
                "everything__trigger-long-running-operation",
                {"duration": 1, "steps": 4},
                progress_callback=on_progress,
            )
            check(not r.is_error, "the long operation", text_of(r))
            check(len(progress) >= 2, "upstream progress relayed", progress)
            seen["progress"] = progress

            try:
                await session.call_tool("chaos__slow", {"ms": 30000}, read_timeout_seconds=1.0)
                raise AssertionError("chaos__slow should have timed out")
            except AssertionError:
                raise
            except Exception as e:  # the SDK's timeout error
                seen["timeout"] = type(e).__name__

            r = await session.call_tool("chaos__is_error", {"message": "no such order"})
            check(r.is_error and "no such order" in text_of(r), "isError passes through", text_of(r))

            r = await session.call_tool("broken__anything", {})
            check(r.is_error and "broken" in text_of(r) and "transport" in text_of(r), "a dead upstream", text_of(r))

            r = await session.call_tool("everything__echo", {"message": "still fine"})
            check(text_of(r) == "Echo: still fine", "the session goes on", text_of(r))

            # A run of two slow tool steps, watched as a resource.
            definition = {"name": "slowpoke", "steps": [
                {"name": "a", "tool": {"server": "chaos", "name": "slow"}, "input": {"ms": 400}},
                {"name": "b", "tool": {"server": "chaos", "name": "slow"}, "input": {"ms": 400}, "after": ["a"]}]}
            r = await session.call_tool("run_start", {"definition": definition})
            check(not r.is_error, "run_start", text_of(r))
            run_id = r.structured_content["run_id"]
            uri = f"weft://runs/{run_id}"
            await session.subscribe_resource(uri)
            with anyio.fail_after(20):
                while True:
                    got = json.loads((await session.read_resource(uri)).contents[0].text)
                    if got["state"] == "completed" and updated.count(uri) >= 1:
                        break
                    await anyio.sleep(0.1)
            seen["resource_updates"] = updated.count(uri)
            await anyio.sleep(0.5)  # let the cancellation reach the chaos server
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--weft", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--data-dir", required=True)
    anyio.run(main, ap.parse_args())
