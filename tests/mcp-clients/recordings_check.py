"""Recordings that outlive their session, with the official Python MCP SDK
against `weft serve --http` (host/tests/e2e/recordings.rs kills the server
between the phases). Prints one JSON object.

- `--phase start`: a session starts a recording, makes a proxied call and
  a preset, and ends (the recording stays open).
- `--phase resume --run RUN`: a second session lists the open recordings,
  reopens RUN (a third session's recording_open is refused while it holds
  it), adds a call, saves it as a template, and replays the template. A
  recording discarded with run_cancel under its session frees the session
  and saves nothing.
- `--phase add --run RUN`: a session reopens RUN, makes one more proxied
  call and ends (host/tests/e2e/web.rs: the page's review sees it arrive).
"""

from __future__ import annotations

import argparse
import json
from contextlib import asynccontextmanager

import anyio
import httpx2
from agent_common import check, structured, text_of
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@asynccontextmanager
async def session(url: str):
    async with streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=60)) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            yield s


async def call(s: ClientSession, tool: str, arguments: dict) -> dict:
    r = await s.call_tool(tool, arguments)
    check(not r.is_error, f"{tool} works", text_of(r))
    return structured(r)


async def start(url: str) -> dict:
    async with session(url) as s:
        started = await call(s, "recording_start", {"name": "greet", "input": {"msg": "hello there"}})
        echoed = await s.call_tool("everything__echo", {"message": "hello there"})
        check(not echoed.is_error, "the proxied call works", text_of(echoed))
        await call(s, "step_preset", {"name": "extra", "output": {"n": 1}})
        return {"run_id": started["recording_id"]}


async def resume(url: str, run: str) -> dict:
    seen: dict = {}
    async with session(url) as b, session(url) as c:
        listed = (await call(b, "recording_list", {}))["recordings"]
        mine = [r for r in listed if r["run_id"] == run]
        check(len(mine) == 1, "the recording outlived its session and the server's kill", listed)
        seen["listed"] = mine[0]
        opened = await call(b, "recording_open", {"run_id": run})
        seen["opened"] = opened
        refused = await c.call_tool("recording_open", {"run_id": run})
        check(refused.is_error is True and "another session" in text_of(refused), "one session holds it", text_of(refused))
        again = await b.call_tool("recording_start", {"name": "other"})
        check(again.is_error is True and "already recording" in text_of(again), "a session records one at a time", text_of(again))
        echoed = await b.call_tool("everything__echo", {"message": "hello there, again"})
        check(not echoed.is_error, "a call adds a step to the reopened recording", text_of(echoed))
        saved = await call(b, "recording_save", {"template": "greet"})
        seen["saved"] = {"run_id": saved["run_id"], "template": saved["template"], "definition": saved["definition"]}
        left = (await call(b, "recording_list", {}))["recordings"]
        check(all(r["run_id"] != run for r in left), "a saved recording is no longer open", left)
        twice = await c.call_tool("recording_open", {"run_id": run})
        check(twice.is_error is True and "not an open recording" in text_of(twice), "a saved recording cannot be reopened", text_of(twice))
        replay = await call(b, "wf_greet", {"msg": "bye now"})
        seen["replay"] = replay
        # A recording discarded (run_cancel) under the session that holds
        # it: the session lets go, says so, and saves nothing.
        doomed = (await call(c, "recording_start", {"name": "doomed"}))["recording_id"]
        await call(c, "run_cancel", {"run_id": doomed})
        after = await c.call_tool("everything__echo", {"message": "still there?"})
        check(after.is_error is True and "no longer open" in text_of(after), "a discarded recording is said, the call not made", text_of(after))
        save = await c.call_tool("recording_save", {"template": "doomed"})
        check(save.is_error is True and "not recording" in text_of(save).lower(), "nothing to save after the discard", text_of(save))
        names = [t["name"] for t in (await call(c, "template_list", {}))["templates"]]
        check("doomed" not in names, "no template from a discarded recording", names)
        fresh = await c.call_tool("recording_start", {"name": "fresh"})
        check(not fresh.is_error, "the session can record again", text_of(fresh))
    return seen


async def add(url: str, run: str) -> dict:
    """Reopen RUN, make one more proxied call, end the session (the
    recording stays open): the web view's review sees it arrive."""
    async with session(url) as s:
        await call(s, "recording_open", {"run_id": run})
        echoed = await s.call_tool("everything__echo", {"message": "hello there, later"})
        check(not echoed.is_error, "a call adds a step to the reopened recording", text_of(echoed))
        listed = (await call(s, "recording_list", {}))["recordings"]
        return {"steps": [r for r in listed if r["run_id"] == run][0]["steps"]}


async def main(args: argparse.Namespace) -> None:
    phases = {"start": lambda: start(args.url), "resume": lambda: resume(args.url, args.run), "add": lambda: add(args.url, args.run)}
    seen = await phases[args.phase]()
    print(json.dumps(seen))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--phase", choices=["start", "resume", "add"], required=True)
    ap.add_argument("--run")
    anyio.run(main, ap.parse_args())
