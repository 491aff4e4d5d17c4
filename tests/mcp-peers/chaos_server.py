#!/usr/bin/env python3
"""chaos_server.py: an MCP server over stdio that misbehaves on purpose.

Python standard library only; raw JSON-RPC 2.0 over newline-delimited JSON on
stdin/stdout (one message per line, UTF-8). Speaks MCP revision 2025-11-25
(the `initialize` handshake). Diagnostics go to stderr, never stdout.

Methods:
  initialize                 -> protocolVersion "2025-11-25", capabilities {"tools": {}}
  notifications/initialized  -> ignored (no reply; requests are served with or without it)
  ping                       -> {}
  tools/list                 -> the tools below (every one has an inputSchema)
  tools/call                 -> see tools; unknown tool -> JSON-RPC error -32602
  notifications/cancelled    -> drops the pending `slow`/`hang` call with that requestId
                                (no response is ever sent for it)
  anything else (e.g. server/discover, resources/list) -> JSON-RPC error -32601, at once
  a line that is not JSON    -> error -32700 with id null

Tools:
  ok(text)                   -> content [text], structuredContent {"text": text}
  crash                      -> process exits with status 1, nothing written for the call
  hang                       -> never answers (until cancelled: then still no answer)
  garbage(answer=false)      -> writes one line that is not JSON; if answer=true it then also
                                answers the call normally ({"garbage": "sent"}); keeps serving
  bad_frame                  -> response with the right id but an invalid CallToolResult
                                (`content` is a string, `isError` a string)
  is_error(message)          -> result {content: [text message], isError: true}
  flaky(key, fail_times, mode="crash"|"is_error")
                             -> the first `fail_times` calls per key fail (crash: exit(1)
                                without answering; is_error: isError result), later calls
                                succeed with structuredContent {"key": key, "calls": n},
                                n = calls for this key so far including this one. Counts are
                                kept in the JSON file named by env CHAOS_STATE (flock'd,
                                fsync'd before crashing), so they survive restarts. Without
                                CHAOS_STATE counts live in memory only (crash mode then never
                                recovers).
  slow(ms)                   -> answers {"slept_ms": ms} after ms milliseconds unless cancelled
  echo_meta                  -> structuredContent = the request's params._meta ({} if absent)

Environment:
  CHAOS_STATE   path of the flaky-count state file (created if missing)
  CHAOS_LOG     if set, every message received is appended to this file as one JSON line
                (unparseable input is logged as {"unparseable": "<line>"}), so a test can
                check what the client sent (e.g. notifications/cancelled, _meta keys)
  CHAOS_NAME    serverInfo.name (default "weft-chaos")
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading

PROTOCOL_VERSION = "2025-11-25"

_out_lock = threading.Lock()
_pending_lock = threading.Lock()
_pending: dict = {}  # request id (json-encoded) -> threading.Timer | None (hang)
_memory_counts: dict = {}


def log_err(msg: str) -> None:
    sys.stderr.write(f"chaos_server[{os.getpid()}]: {msg}\n")
    sys.stderr.flush()


def write_line(raw: str) -> None:
    with _out_lock:
        sys.stdout.write(raw + "\n")
        sys.stdout.flush()


def send(obj: dict) -> None:
    write_line(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))


def respond(req_id, result: dict) -> None:
    send({"jsonrpc": "2.0", "id": req_id, "result": result})


def respond_error(req_id, code: int, message: str, data=None) -> None:
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    send({"jsonrpc": "2.0", "id": req_id, "error": err})


def record(entry) -> None:
    path = os.environ.get("CHAOS_LOG")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(entry, separators=(",", ":"), ensure_ascii=False) + "\n")
        f.flush()


def die(status: int, why: str) -> None:
    log_err(why)
    try:
        sys.stdout.flush()
    finally:
        os._exit(status)


def text_result(text: str, structured=None, is_error: bool = False) -> dict:
    result = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        result["structuredContent"] = structured
    if is_error:
        result["isError"] = True
    return result


def _obj(props: dict, required: list) -> dict:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


TOOLS = [
    {
        "name": "ok",
        "description": "Echo `text` back as text content and structuredContent {text}.",
        "inputSchema": _obj({"text": {"type": "string"}}, ["text"]),
        "outputSchema": _obj({"text": {"type": "string"}}, ["text"]),
    },
    {
        "name": "crash",
        "description": "The server process exits with status 1 mid-call, without answering.",
        "inputSchema": _obj({}, []),
    },
    {
        "name": "hang",
        "description": "Never answers.",
        "inputSchema": _obj({}, []),
    },
    {
        "name": "garbage",
        "description": "Writes a line that is not JSON to stdout, then keeps serving. "
        "With answer=true the call is then answered normally too.",
        "inputSchema": _obj({"answer": {"type": "boolean", "default": False}}, []),
    },
    {
        "name": "bad_frame",
        "description": "Answers with the right id but a result that is not a valid CallToolResult.",
        "inputSchema": _obj({}, []),
    },
    {
        "name": "is_error",
        "description": "Returns a tool result with isError: true and `message` as text.",
        "inputSchema": _obj({"message": {"type": "string"}}, ["message"]),
    },
    {
        "name": "flaky",
        "description": "Fails the first `fail_times` calls per `key` (mode crash: process exits; "
        "mode is_error: isError result), then returns {key, calls}. Counts persist in $CHAOS_STATE.",
        "inputSchema": _obj(
            {
                "key": {"type": "string"},
                "fail_times": {"type": "integer", "minimum": 0},
                "mode": {"type": "string", "enum": ["crash", "is_error"], "default": "crash"},
            },
            ["key", "fail_times"],
        ),
        "outputSchema": _obj({"key": {"type": "string"}, "calls": {"type": "integer"}}, ["key", "calls"]),
    },
    {
        "name": "slow",
        "description": "Answers {slept_ms} after `ms` milliseconds unless cancelled.",
        "inputSchema": _obj({"ms": {"type": "integer", "minimum": 0}}, ["ms"]),
        "outputSchema": _obj({"slept_ms": {"type": "integer"}}, ["slept_ms"]),
    },
    {
        "name": "echo_meta",
        "description": "Returns the request's params._meta as structuredContent ({} if absent).",
        "inputSchema": _obj({}, []),
    },
]
TOOL_NAMES = {t["name"] for t in TOOLS}


def bump_count(key: str) -> int:
    """Increment and return the persisted call count for `key`."""
    path = os.environ.get("CHAOS_STATE")
    if not path:
        _memory_counts[key] = _memory_counts.get(key, 0) + 1
        return _memory_counts[key]
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    with os.fdopen(fd, "r+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        raw = f.read()
        try:
            counts = json.loads(raw) if raw.strip() else {}
            if not isinstance(counts, dict):
                counts = {}
        except ValueError:
            counts = {}
        n = int(counts.get(key, 0)) + 1
        counts[key] = n
        f.seek(0)
        f.truncate()
        f.write(json.dumps(counts, sort_keys=True))
        f.flush()
        os.fsync(f.fileno())
    return n


def _pending_key(req_id) -> str:
    return json.dumps(req_id)


def _finish_slow(req_id, ms: int) -> None:
    with _pending_lock:
        if _pending.pop(_pending_key(req_id), "gone") == "gone":
            return  # cancelled meanwhile
    respond(req_id, text_result(f"slept {ms}ms", {"slept_ms": ms}))


def _bad_args(req_id, msg: str) -> None:
    # Invalid arguments are a tool execution error (isError), per MCP 2025-11-25.
    respond(req_id, text_result(f"invalid arguments: {msg}", is_error=True))


def call_tool(req_id, params: dict) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    if not isinstance(args, dict):
        return _bad_args(req_id, "arguments must be an object")
    if name not in TOOL_NAMES:
        return respond_error(req_id, -32602, f"Unknown tool: {name}")

    if name == "ok":
        text = args.get("text")
        if not isinstance(text, str):
            return _bad_args(req_id, "text must be a string")
        return respond(req_id, text_result(text, {"text": text}))

    if name == "crash":
        die(1, f"crash requested by call id={req_id!r}: exiting 1")

    if name == "hang":
        with _pending_lock:
            _pending[_pending_key(req_id)] = None
        log_err(f"hang: call id={req_id!r} will never be answered")
        return None

    if name == "garbage":
        write_line("this is not JSON {{{ <garbage from chaos_server> ")
        if args.get("answer") is True:
            respond(req_id, text_result("garbage sent", {"garbage": "sent"}))
        return None

    if name == "bad_frame":
        return send({"jsonrpc": "2.0", "id": req_id, "result": {"content": "not-an-array", "isError": "nope"}})

    if name == "is_error":
        message = args.get("message")
        if not isinstance(message, str):
            return _bad_args(req_id, "message must be a string")
        return respond(req_id, text_result(message, is_error=True))

    if name == "flaky":
        key, fail_times, mode = args.get("key"), args.get("fail_times"), args.get("mode", "crash")
        if not isinstance(key, str):
            return _bad_args(req_id, "key must be a string")
        if not isinstance(fail_times, int) or isinstance(fail_times, bool) or fail_times < 0:
            return _bad_args(req_id, "fail_times must be an integer >= 0")
        if mode not in ("crash", "is_error"):
            return _bad_args(req_id, 'mode must be "crash" or "is_error"')
        n = bump_count(key)
        if n <= fail_times:
            if mode == "crash":
                die(1, f"flaky key={key!r} call {n}/{fail_times} failing: exiting 1")
            return respond(req_id, text_result(f"flaky key={key} call {n} failed (fail_times={fail_times})", is_error=True))
        return respond(req_id, text_result(json.dumps({"key": key, "calls": n}), {"key": key, "calls": n}))

    if name == "slow":
        ms = args.get("ms")
        if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
            return _bad_args(req_id, "ms must be an integer >= 0")
        timer = threading.Timer(ms / 1000.0, _finish_slow, args=(req_id, ms))
        timer.daemon = True
        with _pending_lock:
            _pending[_pending_key(req_id)] = timer
        timer.start()
        return None

    if name == "echo_meta":
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            meta = {}
        return respond(req_id, text_result(json.dumps(meta, sort_keys=True), meta))

    return respond_error(req_id, -32603, f"tool {name} not implemented")


def handle(msg) -> None:
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        req_id = msg.get("id") if isinstance(msg, dict) else None
        return respond_error(req_id, -32600, "Invalid Request")
    method = msg.get("method")
    params = msg.get("params") or {}
    is_request = "id" in msg
    req_id = msg.get("id")

    if method is None:
        return None  # a response to something we never sent: ignore

    if not is_request:
        if method == "notifications/cancelled":
            target = params.get("requestId") if isinstance(params, dict) else None
            with _pending_lock:
                pending = _pending.pop(_pending_key(target), "gone")
            if pending != "gone":
                if pending is not None:
                    pending.cancel()
                log_err(f"cancelled call id={target!r} (reason: {params.get('reason')!r})")
        return None  # notifications/initialized and any other notification: nothing to do

    if not isinstance(params, dict):
        return respond_error(req_id, -32602, "params must be an object")
    if method == "initialize":
        return respond(
            req_id,
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": os.environ.get("CHAOS_NAME", "weft-chaos"), "version": "1.0.0"},
                "instructions": "Fault-injection MCP server for weft tests.",
            },
        )
    if method == "ping":
        return respond(req_id, {})
    if method == "tools/list":
        return respond(req_id, {"tools": TOOLS})
    if method == "tools/call":
        return call_tool(req_id, params)
    return respond_error(req_id, -32601, f"Method not found: {method}")


def main() -> None:
    stdin = sys.stdin.buffer
    for raw in iter(stdin.readline, b""):
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            record({"unparseable": line})
            respond_error(None, -32700, "Parse error")
            continue
        record(msg)
        try:
            handle(msg)
        except Exception as exc:  # never die by accident: only on purpose
            log_err(f"internal error: {exc!r}")
            if isinstance(msg, dict) and "id" in msg and "method" in msg:
                respond_error(msg.get("id"), -32603, f"Internal error: {exc}")
    # stdin closed: the client went away.
    os._exit(0)


if __name__ == "__main__":
    main()
