"""A small FastMCP server that serves ONLY MCP revision 2026-07-28.

Run with the venv python:

    .venv/bin/python fastmcp_server.py              # stdio (default)
    .venv/bin/python fastmcp_server.py --http 8765  # streamable HTTP at http://127.0.0.1:8765/mcp

Tools:
    reverse(text: str) -> {"reversed": str}   structured output (outputSchema + structuredContent)
    add(a: int, b: int) -> int               structuredContent {"result": n}, text content "n"
    slow(ms: int) -> str                     sleeps ms, returns "slept <ms>ms"; cancellable
    resume(session: str, context: object) -> str
                                             an agent's callback inbox: appends {"session",
                                             "context", "key"} (`key`: the call's
                                             `_meta["dev.weft/idempotency-key"]`) as a JSON line
                                             to $WEFT_RESUME_LOG; returns "resumed <session>"

How the 2026-07-28-only restriction works (mcp 2.3 / fastmcp 4.1 have no public switch):
by default the SDK serves both eras; on stdio the client's first request decides the era
for the whole connection (`serve_dual_era_loop`: a request carrying the 2026 `_meta`
envelope -> modern; `initialize` -> 2025 handshake era, after which enveloped requests get
-32600). This file restricts it in two places:
  * stdio: `Server.run` is pointed at the SDK's modern-only stream loop
    (`mcp.server.runner._serve_modern_stream`, private in mcp 2.3.0) instead of the
    dual-era loop. `initialize` at any point -> -32022 with data
    {"supported": ["2026-07-28"], "requested": <offered>}; the connection stays usable, so a
    client that tried `initialize` first can still fall back to `server/discover`.
  * HTTP (and stdio too, as a second guard): a FastMCP middleware refuses `initialize`
    with the same -32022 error, so no 2025 HTTP session is ever created.
A request whose envelope names another version is refused by the SDK with -32022.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")

import anyio  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

from fastmcp import Context, FastMCP  # noqa: E402
from fastmcp.server.middleware import Middleware  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION  # noqa: E402
from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: E402

SERVED_VERSIONS = ["2026-07-28"]
assert all(v in MODERN_PROTOCOL_VERSIONS for v in SERVED_VERSIONS), MODERN_PROTOCOL_VERSIONS


def _install_modern_only_stdio_loop() -> bool:
    """Make `Server.run` (used by the stdio transport) serve only the 2026-07-28 era."""
    import mcp.server.lowlevel.server as lowlevel
    import mcp.server.runner as runner

    serve_modern = getattr(runner, "_serve_modern_stream", None)
    if serve_modern is None or not hasattr(lowlevel, "serve_dual_era_loop"):
        return False  # SDK changed: the middleware below still refuses `initialize`

    async def modern_only_loop(server, read_stream, write_stream, *, lifespan_state, raise_exceptions=False, **_):
        try:
            await serve_modern(
                server, read_stream, write_stream, lifespan_state=lifespan_state, raise_exceptions=raise_exceptions
            )
        finally:
            await read_stream.aclose()
            await write_stream.aclose()

    lowlevel.serve_dual_era_loop = modern_only_loop
    return True


MODERN_ONLY_STDIO = _install_modern_only_stdio_loop()


class ModernOnly(Middleware):
    """Refuse the 2025-era `initialize` handshake: only 2026-07-28 is served."""

    async def on_initialize(self, context, call_next):
        requested = None
        msg = context.message
        params = getattr(msg, "params", None)
        if params is not None:
            requested = getattr(params, "protocol_version", None)
        if requested is None and isinstance(msg, dict):
            requested = (msg.get("params") or {}).get("protocolVersion")
        raise MCPError(
            code=UNSUPPORTED_PROTOCOL_VERSION,
            message="this server serves only MCP 2026-07-28; the initialize handshake is not accepted",
            data={"supported": SERVED_VERSIONS, "requested": str(requested)},
        )


mcp = FastMCP("weft-test-fastmcp", version="1.0.0", middleware=[ModernOnly()])


class Reversed(TypedDict):
    reversed: str


@mcp.tool
def reverse(text: str) -> Reversed:
    """Reverse a string. Returns {"reversed": <text reversed>}."""
    return {"reversed": text[::-1]}


@mcp.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool
async def slow(ms: int) -> str:
    """Sleep for `ms` milliseconds, then return "slept <ms>ms". Honours cancellation."""
    try:
        await anyio.sleep(max(ms, 0) / 1000.0)
    except anyio.get_cancelled_exc_class():
        # Observable side channel for tests: one line on stderr.
        print(f"fastmcp_server: slow({ms}) cancelled", file=sys.stderr, flush=True)
        raise
    return f"slept {ms}ms"


@mcp.tool
def resume(session: str, context: object, ctx: Context) -> str:
    """Resume an agent's session with a run's context (a test's callback inbox)."""
    rc = ctx.request_context
    meta = rc.meta if rc is not None and rc.meta is not None else {}
    line = {"session": session, "context": context, "key": meta.get("dev.weft/idempotency-key")}
    path = os.environ.get("WEFT_RESUME_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")
    return f"resumed {session}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT at /mcp")
    ap.add_argument("--host", default="127.0.0.1", help="bind address for --http (default 127.0.0.1)")
    args = ap.parse_args()
    if args.http is not None:
        mcp.run(transport="http", host=args.host, port=args.http, path="/mcp", show_banner=False, log_level="warning")
    else:
        mcp.run(transport="stdio", show_banner=False, log_level="warning")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
