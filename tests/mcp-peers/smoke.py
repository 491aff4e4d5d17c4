"""Self-check of the MCP test peers with the official `mcp` Python SDK client.

    tests/mcp-peers/.venv/bin/python tests/mcp-peers/smoke.py            # all checks
    tests/mcp-peers/.venv/bin/python tests/mcp-peers/smoke.py --schemas  # also print tools/list JSON

Prints one `OK name: detail` or `FAIL name: detail` line per check, then a
closing `N passed, N failed` line; exits 1 if any check failed.
Servers' stderr goes to a temp dir, whose path is printed on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from contextlib import asynccontextmanager
from pathlib import Path

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

import anyio  # noqa: E402

from mcp import Client, MCPError, StdioServerParameters, stdio_client  # noqa: E402

HERE = Path(__file__).resolve().parent
PY = sys.executable
NODE = shutil.which("node") or "node"
EVERYTHING = HERE / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM = HERE / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
INSPECTOR_CLI = HERE / "node_modules/@modelcontextprotocol/inspector-cli/build/index.js"
STEP_TIMEOUT = 30.0

LOGDIR = Path(tempfile.mkdtemp(prefix="mcp-peers-smoke-"))
results: list[tuple[bool, str, str]] = []
schemas: dict[str, list[dict]] = {}


def report(ok: bool, name: str, detail: str) -> None:
    results.append((ok, name, detail))
    print(f"{'OK  ' if ok else 'FAIL'} {name}: {detail}", flush=True)


async def check(name: str, fn) -> object:
    """Run `await fn()` with a timeout; it returns a detail string (OK) or raises (FAIL)."""
    try:
        with anyio.fail_after(STEP_TIMEOUT):
            detail = await fn()
        report(True, name, str(detail))
        return detail
    except BaseException as exc:  # noqa: BLE001 - report everything, including timeouts
        if isinstance(exc, KeyboardInterrupt):
            raise
        msg = f"{type(exc).__name__}: {exc}"
        if os.environ.get("SMOKE_DEBUG"):
            traceback.print_exc()
        report(False, name, msg[:500])
        return None


def stdio(name: str, command: str, args: list[str], env: dict | None = None, cwd: str | None = None):
    errlog = open(LOGDIR / f"{name}.stderr", "a")
    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    return stdio_client(params, errlog=errlog)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@asynccontextmanager
async def http_server(name: str, cmd: list[str], port: int, env: dict | None = None):
    """Start a server process, wait for its port, stop it afterwards."""
    errlog = open(LOGDIR / f"{name}.log", "a")
    proc = subprocess.Popen(cmd, stdout=errlog, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=HERE)
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode} (log: {LOGDIR / (name + '.log')})")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not listen on {port} within 20 s")
                await anyio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def find_mcp_error(exc: BaseException) -> MCPError | None:
    """The first MCPError in `exc`, looking inside (nested) exception groups and causes."""
    if isinstance(exc, MCPError):
        return exc
    for sub in getattr(exc, "exceptions", ()) or ():
        found = find_mcp_error(sub)
        if found is not None:
            return found
    if exc.__cause__ is not None:
        return find_mcp_error(exc.__cause__)
    return None


def text_of(result) -> str:
    return " ".join(getattr(c, "text", f"<{getattr(c, 'type', '?')}>") for c in result.content)


async def list_and_keep(client: Client, key: str) -> list[str]:
    tools = (await client.list_tools()).tools
    schemas[key] = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]
    return [t.name for t in tools]


# ---------------------------------------------------------------- fastmcp_server.py
async def fastmcp_checks() -> None:
    server = str(HERE / "fastmcp_server.py")

    async def auto_stdio():
        t0 = time.monotonic()
        async with Client(stdio("fastmcp", PY, [server]), mode="auto") as c:
            connect = time.monotonic() - t0
            assert c.protocol_version == "2026-07-28", c.protocol_version
            names = await list_and_keep(c, "fastmcp_server")
            assert {"reverse", "add", "slow"} <= set(names), names
            r = await c.call_tool("reverse", {"text": "weft"})
            assert r.structured_content == {"reversed": "tfew"}, r
            a = await c.call_tool("add", {"a": 2, "b": 40})
            assert a.structured_content == {"result": 42} and text_of(a) == "42", a
            s = await c.call_tool("slow", {"ms": 50})
            assert text_of(s) == "slept 50ms", s
            return f"protocol {c.protocol_version} (connect {connect:.2f}s); tools {names}; reverse -> {r.structured_content}; add -> {a.structured_content}"

    await check("fastmcp stdio (auto)", auto_stdio)

    async def legacy_refused():
        try:
            async with Client(stdio("fastmcp", PY, [server]), mode="legacy") as c:
                accepted = c.protocol_version
        except Exception as exc:  # noqa: BLE001
            e = find_mcp_error(exc)
            if e is None:
                raise
            assert e.code == -32022, e
            return f"initialize refused with {e.code} {e.error.data}"
        raise AssertionError(f"legacy handshake accepted at {accepted}")

    await check("fastmcp stdio refuses 2025-11-25 initialize", legacy_refused)

    async def cancel_slow():
        async with Client(stdio("fastmcp_cancel", PY, [server]), mode="2026-07-28") as c:
            t0 = time.monotonic()
            try:
                await c.call_tool("slow", {"ms": 30000}, read_timeout_seconds=0.5)
                raise AssertionError("slow(30000) returned before the 0.5 s timeout")
            except MCPError as exc:
                e = exc
                waited = time.monotonic() - t0
            r = await c.call_tool("add", {"a": 1, "b": 1})
            assert r.structured_content == {"result": 2}
        await anyio.sleep(0.2)
        log = (LOGDIR / "fastmcp_cancel.stderr").read_text()
        assert "slow(30000) cancelled" in log, f"server did not log the cancellation: {log[-300:]!r}"
        return f"timed out after {waited:.2f}s ({e.code} {e.error.message!r}); server saw the cancellation"

    await check("fastmcp stdio slow() cancelled on client timeout", cancel_slow)

    async def http():
        port = free_port()
        async with http_server("fastmcp_http", [PY, server, "--http", str(port)], port) as url:
            async with Client(url, mode="auto") as c:
                assert c.protocol_version == "2026-07-28", c.protocol_version
                r = await c.call_tool("reverse", {"text": "abc"})
                assert r.structured_content == {"reversed": "cba"}, r
            try:
                async with Client(url, mode="legacy") as c:
                    accepted = c.protocol_version
            except Exception as exc:  # noqa: BLE001
                e = find_mcp_error(exc)
                if e is None:
                    raise
                refused = f"legacy initialize refused ({e.code})"
            else:
                raise AssertionError(f"legacy handshake accepted at {accepted}")
            return f"{url} protocol 2026-07-28; reverse -> {r.structured_content}; {refused}"

    await check("fastmcp streamable HTTP", http)


# ---------------------------------------------------------------- chaos_server.py
async def chaos_checks() -> None:
    server = str(HERE / "chaos_server.py")
    state = LOGDIR / "chaos-state.json"
    env = {"CHAOS_STATE": str(state), "CHAOS_LOG": str(LOGDIR / "chaos-received.jsonl")}

    async def basics():
        t0 = time.monotonic()
        async with Client(stdio("chaos", PY, [server], env), mode="auto") as c:
            connect = time.monotonic() - t0
            assert c.protocol_version == "2025-11-25", c.protocol_version
            names = await list_and_keep(c, "chaos_server")
            r = await c.call_tool("ok", {"text": "hi"})
            assert r.structured_content == {"text": "hi"} and text_of(r) == "hi" and not r.is_error, r
            e = await c.call_tool("is_error", {"message": "boom"})
            assert e.is_error and text_of(e) == "boom", e
            m = await c.call_tool("echo_meta", {}, meta={"weft/idempotencyKey": "run1/step2/1"})
            assert m.structured_content.get("weft/idempotencyKey") == "run1/step2/1", m
            f1 = await c.call_tool("flaky", {"key": "k1", "fail_times": 1, "mode": "is_error"})
            f2 = await c.call_tool("flaky", {"key": "k1", "fail_times": 1, "mode": "is_error"})
            assert f1.is_error and f2.structured_content == {"key": "k1", "calls": 2}, (f1, f2)
            return (
                f"auto mode fell back to {c.protocol_version} in {connect:.2f}s (server/discover -> -32601); "
                f"{len(names)} tools; ok/is_error/echo_meta/flaky(is_error) as expected"
            )

    await check("chaos stdio basics", basics)

    async def crash():
        async with Client(stdio("chaos", PY, [server], env), mode="legacy") as c:
            t0 = time.monotonic()
            try:
                await c.call_tool("crash", {}, read_timeout_seconds=10)
            except BaseException as e:  # noqa: BLE001
                if isinstance(e, AssertionError):
                    raise
                return f"call failed after {time.monotonic() - t0:.2f}s with {type(e).__name__}: {str(e)[:120]}"
            raise AssertionError("crash returned a result")

    await check("chaos crash -> client error", crash)

    async def flaky_crash():
        # fail_times=1 in crash mode: first process dies, a fresh one succeeds (count persisted).
        try:
            async with Client(stdio("chaos", PY, [server], env), mode="legacy") as c:
                await c.call_tool("flaky", {"key": "k2", "fail_times": 1}, read_timeout_seconds=10)
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
        async with Client(stdio("chaos", PY, [server], env), mode="legacy") as c:
            r = await c.call_tool("flaky", {"key": "k2", "fail_times": 1})
        assert r.structured_content == {"key": "k2", "calls": 2}, r
        return f"restart then {r.structured_content}; state {state.read_text()}"

    await check("chaos flaky(crash) survives restart via CHAOS_STATE", flaky_crash)

    async def hang_cancel():
        async with Client(stdio("chaos_hang", PY, [server], env), mode="legacy") as c:
            try:
                await c.call_tool("slow", {"ms": 30000}, read_timeout_seconds=0.5)
                raise AssertionError("slow returned")
            except MCPError:
                pass
            r = await c.call_tool("ok", {"text": "still alive"})
            assert text_of(r) == "still alive"
        await anyio.sleep(0.2)
        log = (LOGDIR / "chaos_hang.stderr").read_text()
        assert "cancelled call" in log, f"no cancellation seen: {log[-300:]!r}"
        return "client timeout sent notifications/cancelled; server dropped the call and kept serving"

    await check("chaos slow() cancelled on client timeout", hang_cancel)


# ---------------------------------------------------------------- server-everything
async def everything_checks() -> None:
    async def stdio_check():
        async with Client(stdio("everything", NODE, [str(EVERYTHING), "stdio"]), mode="auto") as c:
            names = await list_and_keep(c, "server-everything")
            need = {"echo", "get-sum", "get-structured-content", "trigger-long-running-operation"}
            assert need <= set(names), f"missing {need - set(names)} in {names}"
            e = await c.call_tool("echo", {"message": "hi"})
            s = await c.call_tool("get-sum", {"a": 2, "b": 3})
            w = await c.call_tool("get-structured-content", {"location": "Chicago"})
            assert "hi" in text_of(e), e
            assert "5" in text_of(s), s
            assert w.structured_content, w
            return (
                f"protocol {c.protocol_version}; {len(names)} tools; echo -> {text_of(e)!r}; "
                f"get-sum -> {text_of(s)!r}; get-structured-content -> {json.dumps(w.structured_content)}"
            )

    await check("server-everything stdio (auto)", stdio_check)

    async def legacy_check():
        async with Client(stdio("everything", NODE, [str(EVERYTHING), "stdio"]), mode="legacy") as c:
            e = await c.call_tool("echo", {"message": "legacy"})
            return f"protocol {c.protocol_version}; echo -> {text_of(e)!r}"

    await check("server-everything stdio (legacy handshake)", legacy_check)

    async def http_check():
        port = free_port()
        cmd = [NODE, str(EVERYTHING), "streamableHttp"]
        async with http_server("everything_http", cmd, port, {"PORT": str(port)}) as url:
            out = []
            for mode in ("auto", "legacy"):
                async with Client(url, mode=mode) as c:
                    e = await c.call_tool("echo", {"message": "over http"})
                    assert "over http" in text_of(e), e
                    out.append(f"{mode}: protocol {c.protocol_version}")
            return f"{url}; echo ok; " + "; ".join(out)

    await check("server-everything streamable HTTP", http_check)


# ---------------------------------------------------------------- server-filesystem
async def filesystem_checks() -> None:
    async def fs_check():
        root = Path(tempfile.mkdtemp(prefix="mcp-fs-"))
        try:
            async with Client(stdio("filesystem", NODE, [str(FILESYSTEM), str(root)]), mode="auto") as c:
                names = await list_and_keep(c, "server-filesystem")
                target = str(root / "hello.txt")
                w = await c.call_tool("write_file", {"path": target, "content": "hello weft\n"})
                assert not w.is_error, w
                r = await c.call_tool("read_text_file", {"path": target})
                assert "hello weft" in text_of(r), r
                assert (root / "hello.txt").read_text() == "hello weft\n"
                outside = await c.call_tool("read_text_file", {"path": "/etc/hostname"})
                assert outside.is_error, outside
                return (
                    f"protocol {c.protocol_version}; {len(names)} tools; write_file -> {text_of(w)!r}; "
                    f"read_text_file -> {text_of(r)!r}; outside root -> isError"
                )
        finally:
            shutil.rmtree(root, ignore_errors=True)

    await check("server-filesystem stdio", fs_check)


# ---------------------------------------------------------------- inspector CLI
async def inspector_check() -> None:
    async def run():
        cmd = [NODE, str(INSPECTOR_CLI), PY, str(HERE / "chaos_server.py"), "--method", "tools/list"]
        res = await anyio.run_process(cmd, check=False, cwd=HERE)
        if res.returncode != 0:
            raise RuntimeError(f"exit {res.returncode}: {res.stderr.decode()[-400:]}")
        tools = [t["name"] for t in json.loads(res.stdout)["tools"]]
        assert "ok" in tools, tools
        return f"inspector 0.15.0 CLI listed chaos tools {tools}"

    await check("inspector CLI tools/list", run)


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", action="store_true", help="print every server's tools/list as JSON at the end")
    args = ap.parse_args()
    await fastmcp_checks()
    await chaos_checks()
    await everything_checks()
    await filesystem_checks()
    await inspector_check()
    if args.schemas:
        print(json.dumps(schemas, indent=2))
    failed = sum(1 for ok, _, _ in results if not ok)
    if failed:
        print(f"server logs: {LOGDIR}")
    else:
        shutil.rmtree(LOGDIR, ignore_errors=True)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
