"""Plays an LLM recording a workflow through `weft serve`'s proxy, with the
official Python MCP SDK (`ClientSession`, protocol 2025-11-25).

    python llm_recording.py --weft target/debug/weft --config weft.toml \
        --data-dir D --out-dir DIR [--mode legacy|auto]

The server's weft.toml must configure `everything` (server-everything) and
`fs` (server-filesystem serving --out-dir). The script:

1. lists tools: the upstreams' tools appear as `everything__echo`,
   `fs__write_file` next to weft's own;
2. `recording_start {name, input: {"message": "hello"}}`;
3. calls `everything__echo {"message": "hello"}`, then
   `fs__write_file {"path": OUT/greeting.txt, "content": <echo's text>}` —
   the second call's argument is the first call's result, typed out
   literally as an LLM would — and checks each result's `_meta`
   `dev.weft/step`;
4. a ref in a call: `everything__echo {"message": "@echo_1"}` resolves
   before forwarding;
5. `recording_save {template, dry_run: true}` and checks the proposals
   (`@input.message` for the echo, `@echo_1` for the file content), then
   saves, refusing nothing;
6. sees the new tool `wf_<template>` and calls it with a new input; the
   file then holds the new greeting.

Prints one JSON object (what it saw) on stdout; any failed check raises.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import anyio
import mcp
from agent_common import check, meta_of, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client


async def play(session: Any, out_dir: str, template: str) -> dict:
    seen: dict[str, Any] = {}
    tools = {t.name: t for t in (await session.list_tools()).tools}
    for name in ["everything__echo", "fs__write_file", "recording_start", "recording_save", "step_preset"]:
        check(name in tools, f"tool {name} listed", sorted(tools))
    check(
        tools["everything__echo"].input_schema["properties"]["message"]["type"] == "string",
        "the upstream schema is kept",
        tools["everything__echo"].input_schema,
    )

    r = await session.call_tool("recording_start", {"name": "greeter", "input": {"message": "hello"}})
    check(not r.is_error, "recording_start", text_of(r))
    seen["recording_id"] = structured(r)["recording_id"]

    r = await session.call_tool("everything__echo", {"message": "hello"})
    check(not r.is_error, "echo", text_of(r))
    echoed = text_of(r)
    check(echoed == "Echo: hello", "echo's result", echoed)
    check(meta_of(r).get("dev.weft/step") == "echo_1", "echo's step in _meta", meta_of(r))

    path = os.path.join(out_dir, "greeting.txt")
    r = await session.call_tool("fs__write_file", {"path": path, "content": echoed})
    check(not r.is_error, "write_file", text_of(r))
    check(meta_of(r).get("dev.weft/step") == "write_file_1", "write's step in _meta", meta_of(r))
    with open(path) as f:
        check(f.read() == "Echo: hello", "the file was written through the proxy")

    # A ref typed by the caller resolves before forwarding.
    r = await session.call_tool("everything__echo", {"message": "@echo_1"})
    check(text_of(r) == "Echo: Echo: hello", "a ref resolved before forwarding", text_of(r))
    check(meta_of(r).get("dev.weft/step") == "echo_2", "the third step", meta_of(r))

    # A bad ref is the caller's to fix, and records nothing.
    r = await session.call_tool("everything__echo", {"message": "@nope_1"})
    check(r.is_error and "nope_1" in text_of(r), "a bad ref is refused", text_of(r))

    r = await session.call_tool("recording_save", {"template": template, "dry_run": True})
    check(not r.is_error, "dry run", text_of(r))
    proposals = structured(r)["replacements"]
    got = {(p["step"], p["path"]): p["reference"] for p in proposals}
    check(got.get(("echo_1", "/message")) == "@input.message", "input proposed", proposals)
    check(got.get(("write_file_1", "/content")) == "@echo_1", "echo's output proposed", proposals)
    seen["proposals"] = proposals

    r = await session.call_tool("recording_save", {"template": template, "description": "echo a message into a file"})
    check(not r.is_error, "save", text_of(r))
    saved = structured(r)
    check(saved["version"] == 1 and saved["tool"] == f"wf_{template}", "saved", saved)
    check(all(p["applied"] for p in saved["replacements"]), "all applied", saved)
    seen["saved"] = {k: saved[k] for k in ["template", "version", "tool", "run_id"]}
    seen["definition"] = saved["definition"]

    tools = {t.name: t for t in (await session.list_tools()).tools}
    check(f"wf_{template}" in tools, "the template is a tool", sorted(tools))
    check(
        tools[f"wf_{template}"].input_schema.get("properties", {}).get("message", {}).get("type") == "string",
        "its input schema comes from the recording's input",
        tools[f"wf_{template}"].input_schema,
    )
    r = await session.call_tool(f"wf_{template}", {"message": "goodbye"})
    check(not r.is_error, "replay", text_of(r))
    replay = structured(r)
    check(replay["state"] == "completed", "the replay completed", replay)
    with open(path) as f:
        content = f.read()
    check(content == "Echo: goodbye", "the replay wrote the new greeting", content)
    seen["replay"] = {"run_id": replay["run_id"], "output": replay.get("output"), "file": content}
    return seen


async def main(args: argparse.Namespace) -> None:
    server = stdio_server(args)
    if args.mode == "legacy":
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                seen = await play(session, args.out_dir, args.template)
                seen["protocol"] = init.protocol_version
    else:
        async with mcp.Client(server, mode="auto") as client:
            seen = await play(client, args.out_dir, args.template)
            seen["protocol"] = client.protocol_version
    print(json.dumps(seen, default=str))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--template", default="greet-file")
    ap.add_argument("--mode", choices=["legacy", "auto"], default="legacy")
    anyio.run(main, ap.parse_args())
