"""Drives `weft serve`'s waits with the official Python MCP SDK: signals, events, elicitation.

Used by host/tests/e2e/serve_waits.rs; runnable by hand too:

    python waits_check.py --mode legacy --weft target/debug/weft --data-dir /tmp/d --scenario signals
    python waits_check.py --mode auto --url http://127.0.0.1:7777/mcp --scenario elicit

`--mode legacy` is `ClientSession` + `initialize` (protocol 2025-11-25);
`--mode auto` is `mcp.Client(..., mode="auto")` (2026-07-28). Scenarios:

- `signals`: a client without elicitation. A run of a template with a signal
  wait is input-required with the prompt and schema (run_start, run_get);
  run_signal refuses invalid data with the schema path (the step still
  waits), unknown steps and steps that do not wait; valid data completes
  the run; a second signal is told the step is already resolved; 50
  concurrent signals to one step: exactly one accepted. event_emit with an
  id twice: the second is a duplicate that resolves nothing. Two runs with
  one concurrency_key: the second stays submitted until the first completes.
  A signal and an event sent while a run sleeps before its waits are kept
  (`status: queued`; `delivered: []`) and taken when the waits start.
- `elicit`: a client with an elicitation callback. run_start of the same
  template asks it: the first answer is invalid, the second valid, and
  run_start returns the completed run; a declined question returns the run
  input-required; the `wf_approve` tool asks too.

Every check that fails raises; on success the script prints one JSON object
(what it saw) on stdout and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

SCHEMA = {
    "type": "object",
    "required": ["approved"],
    "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"}},
}

APPROVE = {
    "name": "approve",
    "description": "Asks whether to refund an amount",
    "input_schema": {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}},
    "steps": [
        {"name": "approve", "wait": {"prompt": "Approve the refund of @input.amount?", "schema": SCHEMA}},
        {"name": "done", "return": {"approved": "@approve.approved", "amount": "@input.amount"}},
    ],
}

PAID = {
    "name": "paid",
    "steps": [{"name": "paid", "wait": {"event": "order.paid", "match": {"order": "@input.order"}}}],
    "output": "@paid",
}

QUICK = {"name": "quick", "steps": [{"name": "r", "return": {"done": True}}]}

# A sleep before two waits: a signal and an event sent during the sleep
# come before their waits, and are kept for them.
EARLY = {
    "name": "early",
    "steps": [
        {"name": "pause", "sleep": {"ms": 1200}},
        {"name": "approve", "after": ["pause"], "wait": {"prompt": "ok?", "schema": SCHEMA}},
        {"name": "reply", "after": ["pause"], "wait": {"event": "early.reply", "match": {"to": "@input.to"}}},
        {"name": "done", "return": {"approved": "@approve.approved", "reply": "@reply.text"}},
    ],
}


def check(cond: bool, what: str, seen: Any = None) -> None:
    if not cond:
        raise AssertionError(f"{what}; saw: {seen!r}")


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


class Asker:
    """An elicitation callback that answers from a script of answers and records the questions."""

    def __init__(self) -> None:
        self.answers: list[types.ElicitResult] = []
        self.questions: list[dict[str, Any]] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.questions.append({"message": params.message, "schema": params.requested_schema})
        check(bool(self.answers), "weft asked no more often than expected", self.questions)
        return self.answers.pop(0)


@asynccontextmanager
async def connect(args: argparse.Namespace, report: dict[str, Any], asker: Asker | None):
    server: Any
    if args.url:
        server = args.url
    else:
        env = {"WEFT_DATA_DIR": args.data_dir, "NO_COLOR": "1"}
        if args.cache_dir:
            env["WEFT_CACHE_DIR"] = args.cache_dir
        server = StdioServerParameters(command=args.weft, args=["serve", "--stdio"], env=env, cwd=args.data_dir)
    if args.mode == "legacy":
        transport = streamable_http_client(server, http_client=httpx2.AsyncClient(timeout=60)) if args.url else stdio_client(server)
        async with transport as (read, write):
            async with ClientSession(read, write, elicitation_callback=asker) as session:
                init = await session.initialize()
                report["protocol"] = init.protocol_version
                yield session
    else:
        if args.url:
            server = streamable_http_client(args.url, http_client=httpx2.AsyncClient(timeout=60))
        async with mcp.Client(server, mode="auto", elicitation_callback=asker) as client:
            report["protocol"] = client.protocol_version
            yield client


async def call(session: Any, name: str, arguments: dict[str, Any]) -> Any:
    return await session.call_tool(name, arguments)


async def run_get(session: Any, run_id: str) -> dict[str, Any]:
    r = await call(session, "run_get", {"run_id": run_id})
    check(not r.is_error, "run_get works", text_of(r))
    return r.structured_content


async def until(session: Any, run_id: str, pred: Any, what: str, seconds: float = 20) -> dict[str, Any]:
    run: dict[str, Any] = {}
    with anyio.move_on_after(seconds):
        while True:
            run = await run_get(session, run_id)
            if pred(run):
                return run
            await anyio.sleep(0.05)
    raise AssertionError(f"{what} within {seconds} s; saw: {run!r}")


def step(run: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in run["steps"] if s["name"] == name)


async def check_tools(session: Any) -> None:
    tools = {t.name: t for t in (await session.list_tools()).tools}
    for name in ["run_signal", "event_emit"]:
        check(name in tools, f"{name} is listed", sorted(tools))
        t = tools[name]
        check(t.output_schema is not None and t.output_schema.get("type") == "object", f"{name} has an output schema", t.output_schema)
        check(t.annotations.read_only_hint is False and t.annotations.idempotent_hint is False, f"{name} is neither read-only nor idempotent", t.annotations)
    check(tools["run_signal"].input_schema.get("required") == ["run_id", "step", "data"], "run_signal requires run_id, step, data", tools["run_signal"].input_schema)
    check("concurrency_key" in tools["run_start"].input_schema["properties"], "run_start takes concurrency_key", tools["run_start"].input_schema)


async def signal(session: Any, run_id: str, step_name: str, data: Any) -> Any:
    return await call(session, "run_signal", {"run_id": run_id, "step": step_name, "data": data})


async def scenario_signals(session: Any, report: dict[str, Any]) -> None:
    await check_tools(session)
    r = await call(session, "template_save", {"definition": APPROVE})
    check(not r.is_error, "the approve template is saved", text_of(r))

    # A client without elicitation: the run waits, and says for what.
    r = await call(session, "run_start", {"template": "approve", "input": {"amount": 5}, "wait_ms": 20000})
    check(not r.is_error, "run_start works", text_of(r))
    out = r.structured_content
    check(out["state"] == "input-required" and out["finished"] is False, "the run waits for input", out)
    check(out["waits"][0]["step"] == "approve" and out["waits"][0]["prompt"] == "Approve the refund of 5?", "run_start shows the wait's prompt", out)
    check("run_signal" in out["note"], "the note says to use run_signal", out)
    run_id = out["run_id"]
    run = await run_get(session, run_id)
    check(run["state"] == "input-required", "run_get: input-required", run)
    w = run["waits"]
    check(len(w) == 1 and w[0]["kind"] == "signal" and w[0]["reason"] == "input-required", "run_get shows the signal wait", w)
    check(w[0]["prompt"] == "Approve the refund of 5?" and w[0]["schema"] == SCHEMA, "run_get shows the prompt and schema", w)
    check(step(run, "approve")["state"] == "waiting", "the step waits", run["steps"])

    # Invalid data: refused with the schema path; the step still waits.
    r = await signal(session, run_id, "approve", {"approved": "yes"})
    check(r.is_error is True, "invalid data is a tool error", r)
    sc = r.structured_content
    check(sc["status"] == "invalid" and [e["path"] for e in sc["errors"]] == ["/approved"], "the error names the schema path", sc)
    check("data/approved" in text_of(r) and "How to fix" in text_of(r), "the text names the path and the fix", text_of(r))
    run = await run_get(session, run_id)
    check(run["state"] == "input-required" and step(run, "approve")["state"] == "waiting", "the step still waits after invalid data", run)
    report["invalid_text"] = text_of(r)

    # Unknown steps and steps that do not wait.
    r = await signal(session, run_id, "nope", {"approved": True})
    check(r.is_error is True and r.structured_content["status"] == "not_found", "an unknown step is not_found", r.structured_content)
    r = await signal(session, run_id, "done", {"approved": True})
    check(r.is_error is True and r.structured_content["status"] == "not_waiting", "a step that does not wait is not_waiting", r.structured_content)
    r = await call(session, "run_signal", {"run_id": "r_nope", "step": "approve", "data": {}})
    check(r.is_error is True and "run_id" in text_of(r), "a malformed run id is an error", text_of(r))

    # Valid data: accepted, the run completes; again: already resolved.
    r = await signal(session, run_id, "approve", {"approved": True, "note": "fine"})
    check(not r.is_error, "valid data is accepted", text_of(r))
    check(r.structured_content["status"] == "accepted" and r.structured_content["output"] == {"approved": True, "note": "fine"}, "accepted with the data as output", r.structured_content)
    run = await until(session, run_id, lambda x: x["state"] == "completed", "the signaled run completes")
    check(run["output"] == {"approved": True, "amount": 5} and run["waits"] == [], "the run's output comes from the signal", run)
    r = await signal(session, run_id, "approve", {"approved": False})
    check(r.is_error is True and r.structured_content["status"] == "already_resolved", "a second signal is already resolved", r.structured_content)
    check(r.structured_content["state"] == "succeeded", "already_resolved says the step's state", r.structured_content)
    check(step(await run_get(session, run_id), "approve")["output"] == {"approved": True, "note": "fine"}, "the second signal changed nothing")

    # 50 concurrent signals to one step: exactly one wins.
    r = await call(session, "run_start", {"template": "approve", "input": {"amount": 7}, "wait_ms": 20000})
    race_id = r.structured_content["run_id"]
    check(r.structured_content["state"] == "input-required", "the race run waits", r.structured_content)
    results = await asyncio.gather(*[signal(session, race_id, "approve", {"approved": i % 2 == 0, "note": str(i)}) for i in range(50)])
    accepted = [x for x in results if not x.is_error]
    refused = [x.structured_content["status"] for x in results if x.is_error]
    check(len(accepted) == 1, "exactly one of 50 concurrent signals is accepted", [x.structured_content for x in results])
    check(set(refused) == {"already_resolved"}, "the 49 others are already resolved", refused)
    winner = accepted[0].structured_content["output"]
    run = await until(session, race_id, lambda x: x["state"] == "completed", "the raced run completes")
    check(step(run, "approve")["output"] == winner, "the step's output is the winner's data", (run, winner))
    report["race"] = {"accepted": len(accepted), "refused": len(refused)}

    # Events: an id makes event_emit idempotent.
    a = (await call(session, "run_start", {"definition": PAID, "input": {"order": "A"}})).structured_content["run_id"]
    b = (await call(session, "run_start", {"definition": PAID, "input": {"order": "B"}})).structured_content["run_id"]
    for rid in (a, b):
        run = await until(session, rid, lambda x: len(x["waits"]) == 1, "the event wait opens")
        check(run["waits"][0]["kind"] == "event" and run["waits"][0]["event"] == "order.paid", "run_get shows the event wait", run["waits"])
    check(run["waits"][0]["match"] == {"order": "B"}, "the wait's match is resolved", run["waits"])
    r = await call(session, "event_emit", {"event": "order.paid", "data": {"order": "A", "amount": 3}, "id": "pay-1"})
    check(not r.is_error, "event_emit works", text_of(r))
    first = r.structured_content
    check(first["duplicate"] is False and first["id"] == "pay-1", "the first emit is not a duplicate", first)
    check(first["delivered"] == [{"run_id": a, "step": "paid"}], "it resolved run A's wait only", first)
    r = await call(session, "event_emit", {"event": "order.paid", "data": {"order": "B", "amount": 4}, "id": "pay-1"})
    second = r.structured_content
    check(not r.is_error and second["duplicate"] is True, "the same id again is a duplicate", second)
    check(second["delivered"] == first["delivered"], "a duplicate answers what the first emit delivered", second)
    run_a = await until(session, a, lambda x: x["state"] == "completed", "run A completes")
    check(run_a["output"] == {"order": "A", "amount": 3}, "run A's output is the event's data", run_a)
    await anyio.sleep(0.3)
    run_b = await run_get(session, b)
    check(run_b["state"] == "working" and len(run_b["waits"]) == 1, "the duplicate resolved nothing: run B still waits", run_b)
    r = await call(session, "event_emit", {"event": "order.paid", "data": {"order": "B", "amount": 4}})
    check(r.structured_content["delivered"] == [{"run_id": b, "step": "paid"}] and r.structured_content["id"], "a new event resolves B", r.structured_content)
    await until(session, b, lambda x: x["state"] == "completed", "run B completes")
    report["events"] = {"first": first, "second": second}

    # One concurrency key: the second run stays submitted until the first completes.
    r = await call(session, "run_start", {"template": "approve", "input": {"amount": 1}, "concurrency_key": "refunds", "wait_ms": 20000})
    first_id = r.structured_content["run_id"]
    check(r.structured_content["state"] == "input-required", "the first keyed run waits for input", r.structured_content)
    r = await call(session, "run_start", {"definition": QUICK, "concurrency_key": "refunds", "wait_ms": 500})
    second_id = r.structured_content["run_id"]
    check(r.structured_content["state"] == "submitted", "the second keyed run stays submitted", r.structured_content)
    await anyio.sleep(0.5)
    check((await run_get(session, second_id))["state"] == "submitted", "still submitted while the first waits")
    r = await signal(session, first_id, "approve", {"approved": False})
    check(not r.is_error, "the first keyed run is signaled", text_of(r))
    await until(session, first_id, lambda x: x["state"] == "completed", "the first keyed run completes")
    second = await until(session, second_id, lambda x: x["state"] == "completed", "the second keyed run runs after the first")
    check(second["output"] == {"done": True}, "the second keyed run's output", second)
    report["queued"] = [first_id, second_id]
    report["run_id"] = run_id

    # A signal and an event before their waits: kept, then taken.
    r = await call(session, "run_start", {"definition": EARLY, "input": {"to": "m1"}, "wait_ms": 0})
    early_id = r.structured_content["run_id"]
    r = await signal(session, early_id, "approve", {"approved": "yes"})
    check(r.is_error is True and r.structured_content["status"] == "invalid", "an early signal is checked against the schema at once", r.structured_content)
    r = await signal(session, early_id, "approve", {"approved": True})
    check(not r.is_error and r.structured_content["status"] == "queued", "an early signal is queued", r.structured_content)
    check("does not wait yet" in r.structured_content["message"], "the answer says why", r.structured_content)
    r = await call(session, "event_emit", {"event": "early.reply", "data": {"to": "m1", "text": "hi"}})
    check(r.structured_content["delivered"] == [], "an early event resolves nothing yet", r.structured_content)
    run = await until(session, early_id, lambda x: x["state"] == "completed", "the early run completes")
    check(run["output"] == {"approved": True, "reply": "hi"}, "the waits took the early signal and event", run)
    report["early"] = run["output"]


async def scenario_elicit(session: Any, asker: Asker, report: dict[str, Any]) -> None:
    r = await call(session, "template_save", {"definition": APPROVE})
    check(not r.is_error, "the approve template is saved", text_of(r))

    # Invalid, then valid: run_start returns the completed run.
    asker.answers = [
        types.ElicitResult(action="accept", content={"approved": "yes"}),
        types.ElicitResult(action="accept", content={"approved": True, "note": "ok"}),
    ]
    r = await call(session, "run_start", {"template": "approve", "input": {"amount": 9}, "wait_ms": 30000})
    check(not r.is_error, "run_start works", text_of(r))
    out = r.structured_content
    check(out["state"] == "completed" and out["output"] == {"approved": True, "amount": 9}, "the answered run completed", out)
    check(len(asker.questions) == 2, "weft asked twice", asker.questions)
    q1, q2 = asker.questions
    check(q1["message"] == "Approve the refund of 9?", "the question is the wait's prompt", q1)
    check(q1["schema"]["properties"]["approved"]["type"] == "boolean" and q1["schema"]["required"] == ["approved"], "the form is the wait's schema", q1)
    check(q2["message"].startswith("Approve the refund of 9?") and "/approved" in q2["message"], "the second question names the error", q2)
    run = await run_get(session, out["run_id"])
    check(step(run, "approve")["output"] == {"approved": True, "note": "ok"}, "the valid answer is the step's output", run)
    report["asked"] = [q["message"] for q in asker.questions]

    # Declined: the run is returned as it is, waiting, with its waits.
    asker.questions.clear()
    asker.answers = [types.ElicitResult(action="decline")]
    r = await call(session, "run_start", {"template": "approve", "input": {"amount": 2}, "wait_ms": 30000})
    out = r.structured_content
    check(not r.is_error and out["state"] == "input-required" and out["finished"] is False, "a declined question leaves the run waiting", out)
    check(out["waits"][0]["step"] == "approve" and "declined" in out["note"], "the result has the waits and says it was declined", out)
    r = await signal(session, out["run_id"], "approve", {"approved": True})
    check(not r.is_error, "the declined run can be signaled later", text_of(r))
    await until(session, out["run_id"], lambda x: x["state"] == "completed", "the declined run completes after run_signal")

    # Three invalid answers: weft stops asking and returns the run waiting.
    asker.questions.clear()
    asker.answers = [types.ElicitResult(action="accept", content={"note": "no"}) for _ in range(3)]
    r = await call(session, "run_start", {"template": "approve", "input": {"amount": 4}, "wait_ms": 30000})
    out = r.structured_content
    check(len(asker.questions) == 3 and out["state"] == "input-required", "at most 3 questions per wait", (asker.questions, out))
    check("invalid" in out["note"], "the note says the answers were invalid", out)

    # The template's own tool asks too.
    asker.questions.clear()
    asker.answers = [types.ElicitResult(action="accept", content={"approved": False})]
    r = await call(session, "wf_approve", {"amount": 3})
    check(not r.is_error and r.structured_content["output"] == {"approved": False, "amount": 3}, "wf_approve asks and completes", r.structured_content)
    check(len(asker.questions) == 1, "wf_approve asked once", asker.questions)
    report["wf_asked"] = len(asker.questions)


async def main(args: argparse.Namespace) -> None:
    report: dict[str, Any] = {"scenario": args.scenario}
    asker = Asker() if args.scenario == "elicit" else None
    async with connect(args, report, asker) as session:
        if args.scenario == "signals":
            await scenario_signals(session, report)
        else:
            assert asker is not None
            await scenario_elicit(session, asker, report)
    print(json.dumps(report))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["legacy", "auto"], required=True)
    ap.add_argument("--weft", help="the weft executable (started as `weft serve --stdio`)")
    ap.add_argument("--data-dir", help="WEFT_DATA_DIR for --weft (also the server's working directory)")
    ap.add_argument("--url", help="a running `weft serve --http` endpoint instead, e.g. http://127.0.0.1:7777/mcp")
    ap.add_argument("--cache-dir", help="WEFT_CACHE_DIR")
    ap.add_argument("--scenario", choices=["signals", "elicit"], required=True)
    a = ap.parse_args()
    if bool(a.url) == bool(a.weft and a.data_dir):
        ap.error("give --weft and --data-dir, or --url")
    try:
        anyio.run(main, a)
    except BaseException as e:  # noqa: BLE001 - report every failure the same way
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        raise
