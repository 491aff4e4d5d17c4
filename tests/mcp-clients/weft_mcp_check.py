"""Drives `weft serve` with the official Python MCP SDK and checks what it does.

Used by host/tests/e2e/serve.rs; runnable by hand too:

    python weft_mcp_check.py --mode legacy --stdio target/debug/weft --data-dir /tmp/d
    python weft_mcp_check.py --mode auto --url http://127.0.0.1:7777/mcp [--token T]

`--mode legacy` is `ClientSession` + `initialize` (protocol 2025-11-25);
`--mode auto` is `mcp.Client(..., mode="auto")` (2026-07-28 where the server
speaks it). Every check that fails raises; on success the script prints one
JSON object (what it saw) on stdout and exits 0. `--scenario` picks the
checks: `full` (everything below but tool steps), `smoke` (list tools, one
run) or `tool-steps` (runs of tool steps on the upstream `ev`, which the
server's weft.toml must configure as server-everything).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

BUILT_IN = [
    "workflow_validate",
    "template_save",
    "template_get",
    "template_list",
    "template_delete",
    "run_start",
    "run_get",
    "run_list",
    "run_events",
    "run_cancel",
    "run_signal",
    "event_emit",
    "plugin_list",
]

# A workflow of plugin code steps: pick a field, then fill a template with it.
GREET = {
    "name": "greet",
    "description": "Greets a user by the name found in a profile",
    "input_schema": {
        "type": "object",
        "required": ["profile"],
        "properties": {"profile": {"type": "object"}},
    },
    "steps": [
        {
            "name": "pick",
            "code": {"plugin": "json-select"},
            "input": {"data": "@input.profile", "path": "user.name"},
        },
        {
            "name": "say",
            "code": {"plugin": "text-template"},
            "input": {"template": "Hello {{who}}!", "values": {"who": "@pick"}},
        },
    ],
    "output": {"greeting": "@say.text"},
}

# GREET after a 300 ms timer: a run that takes a while, so it reports
# progress (a run that ends within 100 ms is answered without).
SLOW_GREET = {
    **GREET,
    "name": "greet-slow",
    "steps": [{"name": "pause", "sleep": {"ms": 300}}, {**GREET["steps"][0], "after": ["pause"]}, GREET["steps"][1]],
}

# Broken twice: an unknown plugin (step 1) and a ref to a step that does not exist (step 0).
BROKEN = {
    "name": "broken",
    "steps": [
        {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": "@nope", "path": "x"}},
        {"name": "b", "code": {"plugin": "no-such-plugin"}, "input": {}},
    ],
}


def check(cond: bool, what: str, seen: Any = None) -> None:
    if not cond:
        raise AssertionError(f"{what}; saw: {seen!r}")


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


class Seen:
    def __init__(self) -> None:
        self.list_changed = 0
        self.changed = anyio.Event()
        self.report: dict[str, Any] = {}

    def on_list_changed(self) -> None:
        self.list_changed += 1
        self.changed.set()

    async def message_handler(self, msg: Any) -> None:
        if getattr(msg, "method", None) == "notifications/tools/list_changed":
            self.on_list_changed()


@asynccontextmanager
async def connect(args: argparse.Namespace, seen: Seen):
    """Yields (call_tool, list_tools, client-or-None) for the chosen mode and transport."""
    if args.stdio:
        env = {"WEFT_DATA_DIR": args.data_dir, "NO_COLOR": "1"}
        if args.cache_dir:
            env["WEFT_CACHE_DIR"] = args.cache_dir
        server: Any = StdioServerParameters(command=args.stdio, args=["serve", "--stdio"], env=env, cwd=args.data_dir)
    else:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        server = args.url
    if args.mode == "legacy":
        if args.stdio:
            transport = stdio_client(server)
        else:
            http = httpx2.AsyncClient(headers=headers, timeout=60)
            transport = streamable_http_client(server, http_client=http)
        async with transport as (read, write):
            async with ClientSession(read, write, message_handler=seen.message_handler) as session:
                init = await session.initialize()
                seen.report["protocol"] = init.protocol_version
                seen.report["server"] = init.server_info.name
                yield session, None
    else:
        if not args.stdio:
            from mcp.client.streamable_http import streamable_http_client as shc

            server = shc(args.url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
        async with mcp.Client(server, mode="auto", message_handler=seen.message_handler) as client:
            seen.report["protocol"] = client.protocol_version
            yield client, client


async def call(session: Any, name: str, arguments: dict[str, Any], **kw: Any) -> Any:
    return await session.call_tool(name, arguments, **kw)


async def list_tool_map(session: Any) -> dict[str, Any]:
    result = await session.list_tools()
    return {t.name: t for t in result.tools}


async def check_tools(session: Any, seen: Seen) -> dict[str, Any]:
    tools = await list_tool_map(session)
    for name in BUILT_IN:
        check(name in tools, f"tool {name} is listed", sorted(tools))
        t = tools[name]
        check(t.input_schema.get("type") == "object", f"{name} has an object input schema", t.input_schema)
        check(t.output_schema is not None and t.output_schema.get("type") == "object", f"{name} has an output schema", t.output_schema)
        check(t.description, f"{name} has a description")
        check(t.annotations is not None, f"{name} has annotations")
    check(tools["run_get"].annotations.read_only_hint is True, "run_get is read-only", tools["run_get"].annotations)
    check(tools["template_delete"].annotations.destructive_hint is True, "template_delete is destructive")
    check(tools["run_start"].annotations.read_only_hint is False, "run_start is not read-only")
    props = tools["run_start"].input_schema.get("properties", {})
    for p in ["template", "definition", "input", "wait_ms"]:
        check(p in props, f"run_start takes {p}", props)
    check("run_id" in tools["run_get"].input_schema.get("required", []), "run_get requires run_id", tools["run_get"].input_schema)
    seen.report["tools"] = sorted(tools)
    return tools


async def check_validation(session: Any, seen: Seen) -> None:
    r = await call(session, "workflow_validate", {"definition": BROKEN})
    check(not r.is_error, "validating a broken definition is not a tool error", text_of(r))
    out = r.structured_content
    check(out["valid"] is False, "the broken definition is invalid", out)
    paths = [p["path"] for p in out["problems"]]
    check("/steps/1/code" in paths, "the unknown plugin is reported at /steps/1/code", paths)
    check(any(p.startswith("/steps/0/input") for p in paths), "the bad ref is reported under /steps/0/input", paths)
    r = await call(session, "workflow_validate", {"definition": GREET})
    check(r.structured_content["valid"] is True and r.structured_content["steps"] == 2, "greet is valid", r.structured_content)
    check("version" not in r.structured_content, "validating saves nothing, so it names no version", r.structured_content)
    # JSON text with a syntax error: its line and column.
    r = await call(session, "workflow_validate", {"definition": '{"name": "x",\n "steps": [}'})
    check(r.structured_content["valid"] is False and "line 2" in r.structured_content["problems"][0]["message"], "a syntax error names its line", r.structured_content)
    # Saving the broken definition is refused with the paths, and stores nothing.
    r = await call(session, "template_save", {"definition": BROKEN})
    check(r.is_error is True, "saving a broken definition is an error", r)
    check("definition/steps/1/code" in text_of(r), "the error names the JSON path", text_of(r))
    check("How to fix" in text_of(r), "the error says how to fix it", text_of(r))
    r = await call(session, "template_list", {})
    check(all(t["name"] != "broken" for t in r.structured_content["templates"]), "nothing half-stored", r.structured_content)
    seen.report["validate_paths"] = paths


async def save_and_wait_for_list_changed(session: Any, client: Any, seen: Seen) -> dict[str, Any]:
    if client is not None and client.protocol_version >= "2026-07-28":
        # 2026-07-28: change notifications come through subscriptions/listen.
        async with client.listen(tools_list_changed=True) as sub:
            r = await call(session, "template_save", {"definition": GREET})
            with anyio.fail_after(10):
                async for _event in sub:
                    seen.on_list_changed()
                    break
    else:
        r = await call(session, "template_save", {"definition": GREET})
        with anyio.fail_after(10):
            await seen.changed.wait()
    check(not r.is_error, "greet is saved", text_of(r))
    check(r.structured_content["tool"] == "wf_greet", "the save names its tool", r.structured_content)
    check(seen.list_changed >= 1, "tools/list_changed was received")
    return r.structured_content


async def check_runs(session: Any, client: Any, seen: Seen, tools_before: dict[str, Any], hostile: str | None) -> None:
    check("wf_greet" not in tools_before, "wf_greet is not listed before the save", sorted(tools_before))
    saved = await save_and_wait_for_list_changed(session, client, seen)
    version = saved["version"]
    tools = await list_tool_map(session)
    check("wf_greet" in tools, "the saved template is a tool", sorted(tools))
    check(tools["wf_greet"].input_schema.get("required") == ["profile"], "wf_greet takes the template's input schema", tools["wf_greet"].input_schema)

    r = await call(session, "template_get", {"name": "greet"})
    check(r.structured_content["version"] == version and r.structured_content["definition"]["name"] == "greet", "template_get returns it", r.structured_content)

    # run_start with a wait: the output of the plugin steps.
    profile = {"user": {"name": "Ada"}}
    r = await call(session, "run_start", {"template": "greet", "input": {"profile": profile}, "wait_ms": 30000})
    check(not r.is_error, "run_start succeeds", text_of(r))
    out = r.structured_content
    check(out["state"] == "completed" and out["finished"] is True, "the run completed within wait_ms", out)
    check(out["output"] == {"greeting": "Hello Ada!"}, "the run's output", out)
    run_id = out["run_id"]

    # A run that takes a while reports progress while the call waits.
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append((p, total, message))

    r = await call(session, "run_start", {"definition": SLOW_GREET, "input": {"profile": profile}, "wait_ms": 30000}, progress_callback=on_progress)
    check(not r.is_error and r.structured_content["output"] == {"greeting": "Hello Ada!"}, "a slower run_start succeeds", text_of(r))
    check(len(progress) >= 1 and progress[-1][1] == 3, "progress notifications were sent", progress)

    # The template as a tool.
    r = await call(session, "wf_greet", {"profile": {"user": {"name": "Grace"}}})
    check(not r.is_error, "wf_greet succeeds", text_of(r))
    check(r.structured_content["output"] == {"greeting": "Hello Grace!"}, "wf_greet returns the output", r.structured_content)
    wf_run_id = r.structured_content["run_id"]
    wf_progress: list[tuple[float, float | None, str | None]] = []

    async def on_wf_progress(p: float, total: float | None, message: str | None) -> None:
        wf_progress.append((p, total, message))

    r = await call(session, "template_save", {"definition": SLOW_GREET})
    check(not r.is_error, "greet-slow is saved", text_of(r))
    r = await call(session, "wf_greet-slow", {"profile": {"user": {"name": "Grace"}}}, progress_callback=on_wf_progress)
    check(not r.is_error and r.structured_content["output"] == {"greeting": "Hello Grace!"}, "wf_greet-slow succeeds", text_of(r))
    check(len(wf_progress) >= 1 and wf_progress[0][1] == 3, "a template tool reports progress too", wf_progress)
    r = await call(session, "wf_greet", {"profile": "not an object"})
    check(r.is_error is True and "input/profile" in text_of(r), "a bad input is refused with its path", text_of(r))

    # An inline definition; a bad input is refused and no run is created.
    before = (await call(session, "run_list", {})).structured_content["runs"]
    r = await call(session, "run_start", {"definition": GREET, "input": {}, "wait_ms": 1000})
    check(r.is_error is True and "input" in text_of(r) and "profile" in text_of(r), "a missing required input is refused", text_of(r))
    after = (await call(session, "run_list", {})).structured_content["runs"]
    check(len(after) == len(before), "no run was created for a bad input", (before, after))
    r = await call(session, "run_start", {"definition": BROKEN})
    check(r.is_error is True and "/steps/1/code" in text_of(r), "a broken inline definition is refused with its path", text_of(r))

    # run_get: the `runs show --json` object.
    r = await call(session, "run_get", {"run_id": run_id})
    run = r.structured_content
    for key in ["id", "template", "version", "state", "input", "output", "error", "parent", "created_at", "updated_at", "steps"]:
        check(key in run, f"run_get has {key}", sorted(run))
    check(run["template"] == "greet" and run["version"] == version and run["state"] == "completed", "run_get shows the run", run)
    check([s["name"] for s in run["steps"]] == ["pick", "say"], "run_get lists the steps", run["steps"])
    check(all(s["state"] == "succeeded" and s["attempts"] == 1 for s in run["steps"]), "every step succeeded once", run["steps"])
    check(run["steps"][0]["output"] == "Ada", "step outputs are shown", run["steps"][0])
    r = await call(session, "run_get", {"run_id": "r_nope"})
    check(r.is_error is True and "run_id" in text_of(r), "a malformed run id is an error", text_of(r))

    # run_list with filters.
    r = await call(session, "run_list", {"state": "completed", "template": "greet"})
    listed = r.structured_content["runs"]
    ids = [x["id"] for x in listed]
    check(run_id in ids and wf_run_id in ids, "run_list lists the runs", ids)
    check(all(x["template"] == "greet" and x["state"] == "completed" for x in listed), "run_list filters by state and template", listed)
    check(ids.index(wf_run_id) < ids.index(run_id), "run_list lists the newest first", ids)
    r = await call(session, "run_list", {"state": "failed"})
    check(r.structured_content["runs"] == [], "no failed runs", r.structured_content)

    # run_events, paged with after_seq.
    r = await call(session, "run_events", {"run_id": run_id})
    evs = r.structured_content["events"]
    kinds = [e["kind"] for e in evs]
    check(kinds[0] == "run.submitted" and kinds[-1] == "run.completed", "events run from submitted to completed", kinds)
    check([e["seq"] for e in evs] == list(range(1, len(evs) + 1)), "events are numbered from 1", evs)
    check(r.structured_content["finished"] is True, "run_events says the run finished")
    check(r.structured_content["more"] is False, "the whole log fit in one page", r.structured_content)
    r = await call(session, "run_events", {"run_id": run_id, "after_seq": evs[-2]["seq"]})
    check([e["kind"] for e in r.structured_content["events"]] == ["run.completed"], "after_seq pages", r.structured_content)
    # A page that stops at `limit` says so; the next one goes on from it.
    r = await call(session, "run_events", {"run_id": run_id, "limit": 2})
    check(len(r.structured_content["events"]) == 2 and r.structured_content["more"] is True, "a page stopped at limit says more", r.structured_content)
    paged, after = [], 0
    while True:
        r = await call(session, "run_events", {"run_id": run_id, "after_seq": after, "limit": 2})
        paged += r.structured_content["events"]
        after = r.structured_content["last_seq"]
        if not r.structured_content["more"]:
            break
    check([e["seq"] for e in paged] == [e["seq"] for e in evs], "paging with more/last_seq gives every event once", paged)

    # run_cancel: of a finished run changes nothing; of a running one stops it.
    r = await call(session, "run_cancel", {"run_id": run_id})
    check(r.structured_content["already_finished"] is True and r.structured_content["state"] == "completed", "canceling a finished run", r.structured_content)
    if hostile:
        spin = {
            "name": "spin",
            "steps": [
                {"name": "spin", "code": {"path": hostile}, "input": {"mode": "loop"}, "timeout_ms": 60000, "limits": {"fuel": 100_000_000_000_000}},
                {"name": "after", "code": {"plugin": "json-select"}, "input": {"data": "@spin", "path": ""}},
            ],
        }
        r = await call(session, "run_start", {"definition": spin, "wait_ms": 300})
        check(not r.is_error and r.structured_content["finished"] is False, "a spinning run is still running", r.structured_content)
        spin_id = r.structured_content["run_id"]
        r = await call(session, "run_cancel", {"run_id": spin_id})
        check(r.structured_content["state"] == "canceled" and r.structured_content["already_finished"] is False, "run_cancel cancels", r.structured_content)
        run = (await call(session, "run_get", {"run_id": spin_id})).structured_content
        check(run["state"] == "canceled" and [s["state"] for s in run["steps"]] == ["canceled", "canceled"], "the canceled run's steps", run)
        seen.report["canceled"] = spin_id
        # run_start's run_fuel: a CPU budget for the whole run; the step
        # that would go past it fails fuel_exhausted, naming the budget.
        fib = {"name": "fib", "steps": [{"name": "f", "code": {"path": hostile}, "input": {"mode": "fib", "n": 25}}]}
        r = await call(session, "run_start", {"definition": fib, "run_fuel": 1000, "wait_ms": 30000})
        out = r.structured_content
        check(not r.is_error and out["state"] == "failed", "a run over its run_fuel fails", out)
        run = (await call(session, "run_get", {"run_id": out["run_id"]})).structured_content
        err = run["steps"][0]["error"]
        check(err["kind"] == "fuel_exhausted" and "run_fuel" in err["message"], "the step names the run's budget", err)
        r = await call(session, "run_start", {"definition": fib, "wait_ms": 30000})
        check(r.structured_content["state"] == "completed", "without run_fuel there is no CPU cap", r.structured_content)
        seen.report["run_fuel"] = err["kind"]
        # Artifacts: listed by run_get, read as resources.
        make = {"name": "make", "steps": [{"name": "make", "code": {"path": hostile}, "input": {"mode": "artifact"}}]}
        r = await call(session, "run_start", {"definition": make, "wait_ms": 30000})
        art_run = r.structured_content["run_id"]
        run = (await call(session, "run_get", {"run_id": art_run})).structured_content
        check([a["name"] for a in run["artifacts"]] == ["data.bin", "report.txt"], "run_get lists the artifacts", run)
        res = await session.read_resource(f"weft://runs/{art_run}/artifacts/report.txt")
        check(res.contents[0].text == "report of make", "a text artifact reads as text", res)
        res = await session.read_resource(f"weft://runs/{art_run}/artifacts/data.bin")
        check(res.contents[0].blob == "AAEC/w==", "a binary artifact reads as base64", res)
        seen.report["artifacts"] = len(run["artifacts"])
    # An input over the server's cap (4 MiB by default): isError naming the
    # cap, and no run is created.
    before = len((await call(session, "run_list", {"limit": 1000})).structured_content["runs"])
    echo = {"name": "echo", "steps": [{"name": "a", "return": {"x": "@input.x"}}]}
    r = await call(session, "run_start", {"definition": echo, "input": {"x": "y" * (5 << 20)}})
    check(r.is_error is True and "4194304-byte cap" in text_of(r), "an oversized input is refused, naming the cap", text_of(r)[:500])
    after = len((await call(session, "run_list", {"limit": 1000})).structured_content["runs"])
    check(after == before, "no run was created for the oversized input", (before, after))
    seen.report["oversized"] = True

    # Deleting the template removes its tool.
    r = await call(session, "template_delete", {"name": "greet-slow"})
    check(r.structured_content["deleted_versions"] == 1, "greet-slow is deleted", r.structured_content)
    seen.changed = anyio.Event()
    r = await call(session, "template_delete", {"name": "greet"})
    check(r.structured_content["deleted_versions"] == 1, "template_delete deletes", r.structured_content)
    tools = await list_tool_map(session)
    check("wf_greet" not in tools, "the deleted template's tool is gone", sorted(tools))
    r = await call(session, "template_get", {"name": "greet"})
    check(r.is_error is True and "template_list" in text_of(r), "a missing template is an error saying what to do", text_of(r))
    seen.report["run_id"] = run_id
    seen.report["progress"] = len(progress)


async def check_plugins(session: Any, seen: Seen) -> None:
    r = await call(session, "plugin_list", {})
    plugins = {p["name"]: p for p in r.structured_content["plugins"]}
    for name in ["json-select", "text-template"]:
        check(name in plugins, f"plugin {name} is listed", sorted(plugins))
        check(plugins[name]["input_schema"] is not None and plugins[name]["description"], f"{name} has a schema and description", plugins[name])
    seen.report["plugins"] = sorted(plugins)


async def check_resources(session: Any, seen: Seen) -> None:
    run_id = seen.report["run_id"]
    r = await session.read_resource(f"weft://runs/{run_id}")
    body = json.loads(r.contents[0].text)
    check(body["id"] == run_id and body["state"] == "completed", "a run reads as a resource", body)


async def check_tool_steps(session: Any, seen: Seen) -> None:
    """Tool steps on the upstream MCP server `ev` (server-everything) configured in weft.toml."""
    sum_echo = {
        "name": "sum-echo",
        "input_schema": {"type": "object", "required": ["a", "b"]},
        "steps": [
            {"name": "sum", "tool": {"server": "ev", "name": "get-sum"}, "input": {"a": "@input.a", "b": "@input.b"}},
            {"name": "echo", "tool": {"server": "ev", "name": "echo"}, "input": {"message": "@sum"}},
        ],
        "output": "@echo",
    }
    r = await call(session, "run_start", {"definition": sum_echo, "input": {"a": 20, "b": 22}, "wait_ms": 60000})
    check(not r.is_error, "a run of tool steps starts", text_of(r))
    out = r.structured_content
    check(out["state"] == "completed", "the tool steps ran", out)
    check("The sum of 20 and 22 is 42" in json.dumps(out["output"]), "the upstream's answer is the output", out)
    seen.report["run_id"] = out["run_id"]
    # An unknown server is refused offline, an unknown tool and a bad tool input online.
    bad = {
        "name": "bad-tools",
        "steps": [
            {"name": "a", "tool": {"server": "nowhere", "name": "echo"}, "input": {"message": "x"}},
        ],
    }
    r = await call(session, "workflow_validate", {"definition": bad})
    check([p["path"] for p in r.structured_content["problems"]] == ["/steps/0/tool/server"], "an unknown server is a problem", r.structured_content)
    bad["steps"] = [
        {"name": "b", "tool": {"server": "ev", "name": "ecko"}, "input": {"message": "x"}},
        {"name": "c", "tool": {"server": "ev", "name": "get-sum"}, "input": {"a": "one", "b": 2}},
    ]
    before = len((await call(session, "run_list", {})).structured_content["runs"])
    r = await call(session, "run_start", {"definition": bad, "wait_ms": 1000})
    check(r.is_error is True, "a run with a bad tool step is refused", text_of(r))
    check("definition/steps/0/tool/name" in text_of(r) and "definition/steps/1/input" in text_of(r), "the refusal names both paths", text_of(r))
    after = len((await call(session, "run_list", {})).structured_content["runs"])
    check(before == after, "no run was created", (before, after))


async def main(args: argparse.Namespace) -> None:
    seen = Seen()
    started = time.monotonic()
    async with connect(args, seen) as (session, client):
        tools = await check_tools(session, seen)
        if args.scenario == "tool-steps":
            await check_tool_steps(session, seen)
        elif args.scenario == "full":
            await check_validation(session, seen)
            await check_plugins(session, seen)
            await check_runs(session, client, seen, tools, args.hostile)
            await check_resources(session, seen)
        else:
            r = await call(session, "run_start", {"definition": GREET, "input": {"profile": {"user": {"name": "Bob"}}}, "wait_ms": 30000})
            check(r.structured_content["output"] == {"greeting": "Hello Bob!"}, "a run completes", r.structured_content)
            seen.report["run_id"] = r.structured_content["run_id"]
    seen.report["list_changed"] = seen.list_changed
    seen.report["seconds"] = round(time.monotonic() - started, 2)
    print(json.dumps(seen.report))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["legacy", "auto"], required=True)
    ap.add_argument("--stdio", metavar="WEFT", help="start WEFT serve --stdio")
    ap.add_argument("--data-dir", help="WEFT_DATA_DIR for --stdio (also its working directory)")
    ap.add_argument("--cache-dir", help="WEFT_CACHE_DIR for --stdio")
    ap.add_argument("--url", help="an HTTP endpoint, e.g. http://127.0.0.1:7777/mcp")
    ap.add_argument("--token", help="bearer token for --url")
    ap.add_argument("--hostile", help="path of the hostile test guest (enables the cancel check)")
    ap.add_argument("--scenario", choices=["full", "smoke", "tool-steps"], default="full")
    a = ap.parse_args()
    if bool(a.stdio) == bool(a.url):
        ap.error("give exactly one of --stdio and --url")
    try:
        anyio.run(main, a)
    except BaseException as e:  # noqa: BLE001 - report every failure the same way
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        raise
