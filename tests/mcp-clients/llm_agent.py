"""Plays an LLM agent that knows weft only through MCP: `tools/list`, the
`initialize` instructions, the guide resource and what results say (no
docs/). A script, not a model: each step is what an agent would do next,
and each check is what it would have to notice.

    python llm_agent.py --weft target/debug/weft --config weft.toml \
        --data-dir D [--cache-dir C] [--measure-only]

The server's weft.toml must configure `everything` (server-everything,
stdio) and `gone` (a server that cannot be started). The script:

1. reads the instructions, lists tools (prints the size of `tools/list`),
   reads `weft://guide`, `weft://schema/definition` and the prompt
   `workflow_guide`, and validates every example of the guide;
2. builds a workflow from the guide's first example, validates, saves and
   runs it through its `wf_` tool twice with different input;
3. makes every mistake agents were seen to make (another template
   language's placeholders, misspelt names, `server__tool`, a `when`
   string, a ref to a field the output lacks) and checks each answer;
4. records a session (4 calls, two of them independent, a preset, a
   removed mistake), saves it (the DAG must keep the independent calls
   parallel), replays it with other input (the output must change), runs
   it with `run_start.presets`, and diffs the replay against the recording;
5. records a session whose literals are coincidences (`{a: 5, b: 6}`) and
   checks the save says why a replay would repeat it, and that accepting
   the candidates makes a replay follow its input.

Prints one JSON object (what it saw) on stdout; any failed check raises.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

import anyio
from agent_common import check, meta_of, server_args, stdio_server, structured, text_of
from mcp import ClientSession
from mcp.client.stdio import stdio_client


out = structured


class Agent:
    def __init__(self, session: ClientSession) -> None:
        self.s = session

    async def call(self, tool: str, args: dict, ok: bool = True) -> Any:
        r = await self.s.call_tool(tool, args)
        if ok:
            check(not r.is_error, f"{tool} succeeds", text_of(r))
        else:
            check(bool(r.is_error), f"{tool} is refused", out(r) or text_of(r))
        return r

    async def validate(self, definition: dict) -> dict:
        return out(await self.call("workflow_validate", {"definition": definition}))

    async def problem(self, definition: dict, path: str, *words: str) -> dict:
        """The definition is invalid, with a problem at `path` whose message
        and hint together hold every word."""
        v = await self.validate(definition)
        check(v["valid"] is False, f"invalid: {path}", v)
        hit = [p for p in v["problems"] if p["path"] == path]
        check(bool(hit), f"a problem at {path}", v["problems"])
        said = " ".join(f"{p['message']} {p.get('hint') or ''}" for p in hit)
        squeezed = said.replace(" ", "")
        for w in words:
            check(w in said or w.replace(" ", "") in squeezed, f"`{w}` said at {path}", hit)
        return v


SUM = {
    "name": "add",
    "input_schema": {"type": "object", "required": ["a", "b"],
                     "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
    "steps": [
        {"name": "sum", "tool": {"server": "everything", "name": "get-sum"},
         "input": {"a": "@input.a", "b": "@input.b"}},
        {"name": "say", "tool": {"server": "everything", "name": "echo"}, "input": {"message": "result: @sum"}},
    ],
}


def with_step(i: int, **changes: Any) -> dict:
    d = json.loads(json.dumps(SUM))
    d["steps"][i].update(changes)
    return d


def own_tools_bytes(tools: list) -> int:
    """The bytes of weft's own tools in tools/list (not upstreams', not wf_)."""
    own = [t for t in tools if "__" not in t.name and not t.name.startswith("wf_")]
    return sum(len(t.model_dump_json(by_alias=True, exclude_none=True)) for t in own)


async def learn(a: Agent, seen: dict, instructions: str) -> None:
    check("weft://guide" in instructions, "the instructions point at the guide", instructions)
    listed = await a.s.list_tools()
    seen["tools_list_bytes"] = len(listed.model_dump_json(by_alias=True, exclude_none=True))
    seen["own_tools_bytes"] = own_tools_bytes(listed.tools)
    tools = {t.name: t for t in listed.tools}
    # Output schemas are brief in tools/list; the full one is a resource.
    brief = tools["run_get"].output_schema
    where = brief.get("description", "")
    check("weft://schema/tools/run_get" in where and "$defs" not in brief, "run_get's output schema is brief", brief)
    full = await a.s.read_resource("weft://schema/tools/run_get")
    full_schema = json.loads(full.contents[0].text)
    check("attempts" in json.dumps(full_schema) and "$defs" in full_schema, "the full schema is a resource", full_schema)
    seen["full_run_get_schema_bytes"] = len(full.contents[0].text)
    for name in ["workflow_validate", "template_save", "run_start", "run_compare", "step_code",
                 "recording_remove_step", "everything__get-sum"]:
        check(name in tools, f"tool {name} listed", sorted(tools))
    for name in ["workflow_validate", "template_save", "run_start"]:
        t = tools[name]
        check("weft://guide" in json.dumps(t.input_schema) or "weft://guide" in t.description,
              f"{name} points at the guide", t.description)
        check("Example:" in t.description and '"steps"' in t.description, f"{name} has an example", t.description)
        check(len(json.dumps(t.input_schema)) < 3000, f"{name}'s input schema is not the whole format",
              len(json.dumps(t.input_schema)))
    check("[`" not in listed.model_dump_json(), "no rustdoc links in tools/list")
    check("-1..10" in tools["recording_save"].description, "recording_save states its value rules")

    guide = (await a.s.read_resource("weft://guide")).contents[0].text
    schema = json.loads((await a.s.read_resource("weft://schema/definition")).contents[0].text)
    check("steps" in schema.get("properties", {}), "the definition schema", list(schema))
    prompt = await a.s.get_prompt("workflow_guide", {"goal": "add two numbers"})
    said = " ".join(getattr(m.content, "text", "") for m in prompt.messages)
    check("weft://schema/definition" in said and "add two numbers" in said, "the prompt", said[:300])
    examples = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", guide, re.S)]
    check(len(examples) >= 4, "the guide has examples", len(examples))
    seen["guide_examples"] = []
    for ex in examples:
        v = await a.validate(ex)
        check(v["valid"], f"the guide's example {ex['name']} validates", v)
        seen["guide_examples"].append({"name": ex["name"], "warnings": len(v.get("warnings", []))})


async def build_and_run(a: Agent, seen: dict) -> None:
    v = await a.validate(SUM)
    check(v["valid"] and not v.get("warnings"), "the first try validates", v)
    saved = out(await a.call("template_save", {"definition": SUM}))
    check(saved["tool"] == "wf_add" and not saved.get("warnings"), "saved as a tool", saved)
    tools = {t.name for t in (await a.s.list_tools()).tools}
    check("wf_add" in tools, "wf_add is listed", sorted(tools))
    first = out(await a.call("wf_add", {"a": 2, "b": 3}))
    second = out(await a.call("wf_add", {"a": 40, "b": 2}))
    check(first["output"]["say"] == "Echo: result: The sum of 2 and 3 is 5.", "the run's output", first)
    check(second["output"]["say"] == "Echo: result: The sum of 40 and 2 is 42.", "new input, new output", second)
    run = out(await a.call("run_get", {"run_id": second["run_id"]}))
    say = next(s for s in run["steps"] if s["name"] == "say")
    check(say["input"] == {"message": "result: The sum of 40 and 2 is 42."}, "run_get shows resolved input", say)
    seen["built"] = {"first": first["run_id"], "second": second["run_id"]}
    # A server that cannot be reached: valid, saved, but never silently.
    away = {"name": "away", "steps": [{"name": "x", "tool": {"server": "gone", "name": "anything"}}]}
    v = await a.validate(away)
    check(v["valid"] and any("cannot reach MCP server `gone`" in w["message"] for w in v["warnings"]),
          "an unreachable server is a warning", v)
    saved = out(await a.call("template_save", {"definition": away}))
    check(saved["version"] == 1 and any(w["path"] == "/steps/0/tool/server" for w in saved["warnings"]),
          "saved with the warning", saved)


async def mistakes(a: Agent, seen: dict) -> None:
    said = {}
    for wrong in ["{{sum.output}}", "$sum.output", "${sum}"]:
        v = await a.problem(with_step(1, input={"message": f"result: {wrong}" if wrong[0] == "{" else wrong}),
                            "/steps/1/input/message", "@sum", "not a weft ref")
        said[wrong] = v["problems"][0]
    await a.problem(with_step(0, tool={"server": "everything", "name": "get-summ"}), "/steps/0/tool/name",
                    "did you mean `get-sum`?", "tools/list")
    await a.problem(with_step(0, input={"a": "one", "b": 2}), "/steps/0/input/a", "get-sum")
    await a.problem(with_step(0, tool="everything__get-sum"), "/steps/0/tool",
                    '{"tool": {"server": "everything", "name": "get-sum"}}')
    await a.problem(with_step(0, tool={"name": "everything__get-sum"}), "/steps/0/tool",
                    '"server": "everything"')
    await a.problem(with_step(1, when="@sum"), "/steps/1/when", '{"when": {"ref": "@sum"}}')
    await a.problem(with_step(1, when="@sum.n > 3"), "/steps/1/when", '"gt": 3')
    await a.problem(with_step(0, tool={"server": "everythin", "name": "get-sum"}), "/steps/0/tool/server",
                    "did you mean `everything`?")
    v = await a.problem({"name": "p", "steps": [{"name": "s", "code": {"plugin": "json-selct"}}]},
                        "/steps/0/code", "did you mean `json-select`?", "plugin_list")
    check("weft plugin" not in json.dumps(v), "MCP hints name MCP tools, not commands", v)
    # What validation refuses, saving refuses: nothing is stored, no tool appears.
    bad = with_step(0, tool={"server": "everything", "name": "get-summ"})
    bad["name"] = "never"
    r = await a.call("template_save", {"definition": bad}, ok=False)
    check("get-summ" in text_of(r), "template_save names the unknown tool", text_of(r))
    names = [t["name"] for t in out(await a.call("template_list", {}))["templates"]]
    check("never" not in names, "nothing was saved", names)
    # run_start tells the tool problem and the input problem at once.
    r = await a.call("run_start", {"definition": bad, "input": {"a": "x"}}, ok=False)
    probs = out(r)["problems"]
    check({p["argument"] for p in probs} == {"definition", "input"}, "definition and input problems together",
          probs)
    # A ref to a field the output does not have fails the step, naming it.
    missing = with_step(1, input={"message": "result: @sum.text"})
    check((await a.validate(missing))["valid"], "a field ref validates (the output is not known yet)")
    r = out(await a.call("run_start", {"definition": missing, "input": {"a": 5, "b": 6}, "wait_ms": 30000}))
    check(r["state"] == "failed" and r["error"]["kind"] == "validation", "a missing field fails the run", r)
    check("`@sum.text` resolves to nothing" in r["error"]["message"] and "a string" in r["error"]["message"],
          "the error names the ref and what the output holds", r["error"])
    opt = {"name": "opt", "steps": [
        {"name": "sum", "tool": {"server": "everything", "name": "get-sum"}, "input": {"a": 5, "b": 6}},
        {"name": "out", "return": {"text": "@sum.text?", "sum": "@sum"}}]}
    r = out(await a.call("run_start", {"definition": opt, "wait_ms": 30000}))
    check(r["state"] == "completed" and r["output"] == {"text": None, "sum": "The sum of 5 and 6 is 11."},
          "`?` opts into null", r)
    # Invalid params upstream is not retried.
    retried = {"name": "retried", "steps": [
        {"name": "sum", "tool": {"server": "everything", "name": "get-sum"}, "input": {"a": "@input.a", "b": 1},
         "retry": {"max_attempts": 3, "initial_delay_ms": 10}}]}
    r = out(await a.s.call_tool("run_start", {"definition": retried, "input": {"a": "x"}, "wait_ms": 30000}))
    run = out(await a.call("run_get", {"run_id": r["run_id"]}))
    step = run["steps"][0]
    check(r["state"] == "failed" and step["attempts"] == 1 and step["error"]["retryable"] is False,
          "an upstream invalid-params is not retryable", step)
    # Names that are almost right.
    r = await a.call("run_start", {"template": "ad", "input": {}}, ok=False)
    check("did you mean `add`?" in text_of(r), "a template did-you-mean", text_of(r))
    r = await a.s.call_tool("wf_ad", {"a": 1, "b": 2})
    check(r.is_error and "did you mean `wf_add`?" in text_of(r), "a wf_ tool did-you-mean", text_of(r))
    waiting = {"name": "asks", "steps": [
        {"name": "approve", "wait": {"prompt": "ok?", "schema": {"type": "object"}}}]}
    started = out(await a.call("run_start", {"definition": waiting, "wait_ms": 5000}))
    r = await a.call("run_signal", {"run_id": started["run_id"], "step": "aprove", "data": {}}, ok=False)
    check("did you mean `approve`?" in text_of(r), "a signal target did-you-mean", text_of(r))
    await a.call("run_cancel", {"run_id": started["run_id"]})
    seen["mistakes"] = said


async def record(a: Agent, seen: dict) -> None:
    await a.call("recording_start", {"name": "weather-sum", "input": {"a": 15, "b": 27, "city": "Chicago"}})
    r = await a.call("everything__get-sum", {"a": 15, "b": 27})
    total = text_of(r)
    await a.call("everything__get-structured-content", {"location": "Chicago"})
    await a.call("everything__echo", {"message": "oops"})
    removed = out(await a.call("recording_remove_step", {}))
    check(removed["removed"] == "echo_1", "the mistaken call is removed", removed)
    r = await a.call("everything__echo", {"message": total})
    check(meta_of(r).get("dev.weft/step") == "echo_1", "the call again takes the name back", meta_of(r))
    pre = out(await a.call("step_preset", {"name": "units", "output": {"unit": "C"}}))
    check(pre["step"] == "units", "a preset", pre)
    code = out(await a.call("step_code", {"plugin": "text-template", "input": {
        "template": "{{s}} / {{t}} {{u}}",
        "values": {"s": "@echo_1", "t": "@get_structured_content_1.temperature", "u": "@units.unit"}}}))
    check(code["step"] == "text_template_1" and code["output"]["text"] == f"Echo: {total} / 36 C",
          "a plugin call is recorded", code)
    dry = out(await a.call("recording_save", {"template": "weather-sum", "dry_run": True}))
    refs = {(p["step"], p["path"]): p["reference"] for p in dry["replacements"]}
    check(refs.get(("get_sum_1", "/a")) == "@input.a" and refs.get(("get_structured_content_1", "/location"))
          == "@input.city" and refs.get(("echo_1", "/message")) == "@get_sum_1", "the proposals", dry)
    effects = {e["field"]: e for e in dry["replay"]}
    check(effects["a"]["changes"] == ["get_sum_1"] and "text_template_1" in effects["a"]["through"],
          "what a new `a` changes", effects)
    check(dry["unused_input"] == [], "every input field is used", dry)
    saved = out(await a.call("recording_save", {"template": "weather-sum"}))
    steps = {s["name"]: s for s in saved["definition"]["steps"]}
    deps = {n: set(re.findall(r"@([A-Za-z_]\w*)", json.dumps(s.get("input")))) - {"input"} for n, s in steps.items()}
    check(deps["get_sum_1"] == set() and deps["get_structured_content_1"] == set()
          and all("after" not in s for s in steps.values()), "the independent calls stay parallel", deps)
    check(steps["text_template_1"]["code"] == {"plugin": "text-template"}, "the code step is saved", steps)
    replay = out(await a.call("wf_weather-sum", {"a": 1, "b": 2, "city": "Los Angeles"}))
    check(replay["state"] == "completed" and replay["output"]["text"]
          == "Echo: The sum of 1 and 2 is 3. / 73 C", "the replay follows its input", replay)
    preset = out(await a.call("run_start", {"template": "weather-sum", "input": {"a": 1, "b": 2, "city": "Chicago"},
                                            "presets": {"units": {"unit": "F"}}, "wait_ms": 30000}))
    check(preset["output"]["text"] == "Echo: The sum of 1 and 2 is 3. / 36 F", "run_start.presets", preset)
    diff = out(await a.call("run_compare", {"run": replay["run_id"]}))
    check(diff["with"] == saved["run_id"], "compared with the recording", diff)
    first = diff["first_divergence"]
    check(first["step"] == "get_sum_1" and first["what"] == "input"
          and {"path": "/a", "run": 1, "with": 15} in first["changes"], "the first divergence", first)
    same = [s["step"] for s in diff["steps"] if s["same"]]
    check(same == ["units"], "only the preset is the same", diff["steps"])
    seen["recording"] = {"saved": saved["run_id"], "replay": replay["run_id"], "summary": diff["summary"]}


async def silent_sum(a: Agent, seen: dict) -> None:
    await a.call("recording_start", {"name": "small", "input": {"a": 5, "b": 6}})
    await a.call("everything__get-sum", {"a": 5, "b": 6})
    dry = out(await a.call("recording_save", {"template": "small-sum", "dry_run": True}))
    check(dry["replacements"] == [] and dry["unused_input"] == ["a", "b"], "nothing used: said so", dry)
    check(any("c1" in w for w in dry["warnings"]), "the warning names the candidate to accept", dry["warnings"])
    ids = [c["id"] for c in dry["candidates"] if c["reference"] in ("@input.a", "@input.b")]
    saved = out(await a.call("recording_save", {"template": "small-sum", "accept": ids}))
    check(saved["definition"]["steps"][0]["input"] == {"a": "@input.a", "b": "@input.b"}, "accepted", saved)
    replay = out(await a.call("wf_small-sum", {"a": 100, "b": 1}))
    check(replay["output"] == "The sum of 100 and 1 is 101.", "no silent wrong answer", replay)
    seen["small_sum"] = replay["output"]


async def main(args: argparse.Namespace) -> None:
    server = stdio_server(args)
    seen: dict[str, Any] = {}
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            a = Agent(session)
            if args.measure_only:
                listed = await session.list_tools()
                seen["tools_list_bytes"] = len(listed.model_dump_json(by_alias=True, exclude_none=True))
                seen["own_tools_bytes"] = own_tools_bytes(listed.tools)
                seen["tools"] = len(listed.tools)
            else:
                await learn(a, seen, init.instructions or "")
                await build_and_run(a, seen)
                await mistakes(a, seen)
                await record(a, seen)
                await silent_sum(a, seen)
    print(json.dumps(seen, default=str))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    server_args(ap)
    ap.add_argument("--measure-only", action="store_true")
    anyio.run(main, ap.parse_args())
