"""A remote A2A agent built with the official Python SDK (a2a-sdk 1.3's
server: DefaultRequestHandler, an in-memory task store, its JSON-RPC and
card routes under uvicorn): the other side of weft's agent steps in
host/tests/e2e/a2a_steps.rs.

What it does with a message's data part:
  {"text": T, "sleep": S?}  works S seconds, then completes with an
                            artifact: one text part (T upper-cased) and one
                            data part {"upper": ..., "length": ...}
  {"ask": Q, "then": Q2?,   asks for input: Q as its question, with the
   "draft": D?}             JSON Schema CITY in the part's metadata (and D
                            published first as an artifact, if given); the
                            answer {"city", "sleep"?} works `sleep` seconds,
                            then asks Q2 (no schema) if given, whose text
                            answer Y makes the result "CITY Y"; otherwise the
                            result is the city upper-cased
  {"fail": R}               fails with reason R
Every task it creates is appended to $A2A_REMOTE_LOG as one JSON line
{"task", "context", "input"}, every answer it takes as {"answer", "task",
"message"} and every cancel as {"canceled": task}.

Usage: remote_agent.py PORT   (prints "listening PORT" once it serves)
"""

import asyncio
import json
import os
import sys

import uvicorn
from a2a.helpers.proto_helpers import new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandlerV2 as DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct
from starlette.applications import Starlette

PORT = int(sys.argv[1])
LOG = os.environ.get("A2A_REMOTE_LOG", "/dev/null")


CITY = {"type": "object", "required": ["city"], "additionalProperties": False,
        "properties": {"city": {"type": "string", "minLength": 1}, "sleep": {"type": "number"}}}
# What each task asked so far: its first input and the answers given.
ASKED = {}


def log(entry):
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


class Upper(AgentExecutor):
    async def execute(self, context, event_queue):
        msg = context.message
        data = {}
        for p in msg.parts:
            if p.HasField("data"):
                data = MessageToDict(p.data)
        task = context.current_task
        if task is not None and task.id in ASKED:
            return await self.answered(context, event_queue, task, msg, data)
        if task is None:
            task = new_task_from_user_message(msg)
            await event_queue.enqueue_event(task)
            log({"task": task.id, "context": task.context_id, "input": data})
        up = TaskUpdater(event_queue, task.id, task.context_id)
        await up.start_work()
        if "ask" in data:
            ASKED[task.id] = {"input": data, "answers": []}
            if "draft" in data:
                await up.add_artifact([new_data_part(data["draft"])], name="draft")
            part = new_text_part(str(data["ask"]))
            schema = Struct()
            schema.update({"schema": CITY})
            part.metadata.CopyFrom(schema)
            await up.requires_input(up.new_agent_message([part]))
            return
        if "fail" in data:
            await up.failed(up.new_agent_message([new_text_part(str(data["fail"]))]))
            return
        await asyncio.sleep(float(data.get("sleep") or 0))
        text = str(data.get("text", ""))
        await up.add_artifact([new_text_part(text.upper()),
                               new_data_part({"upper": text.upper(), "length": len(text)})], name="result")
        await up.complete()

    async def answered(self, context, event_queue, task, msg, data):
        text = "".join(p.text for p in msg.parts if p.HasField("text"))
        answer = data if data else text
        log({"answer": answer, "task": task.id, "message": msg.message_id})
        asked = ASKED[task.id]
        asked["answers"].append(answer)
        up = TaskUpdater(event_queue, task.id, task.context_id)
        await up.start_work()
        if len(asked["answers"]) == 1:
            await asyncio.sleep(float(answer.get("sleep") or 0))
            if asked["input"].get("then"):
                await up.requires_input(up.new_agent_message([new_text_part(str(asked["input"]["then"]))]))
                return
        result = " ".join([asked["answers"][0]["city"]] + [str(a) for a in asked["answers"][1:]]).upper()
        await up.add_artifact([new_text_part(result), new_data_part({"upper": result, "length": len(result)})],
                              name="result")
        await up.complete()

    async def cancel(self, context, event_queue):
        log({"canceled": context.task_id})
        up = TaskUpdater(event_queue, context.task_id, context.context_id)
        await up.cancel()


url = f"http://127.0.0.1:{PORT}"
card = AgentCard(
    name="upper", description="Upper-cases text, slowly if asked.", version="1",
    supported_interfaces=[AgentInterface(url=url + "/", protocol_binding="JSONRPC", protocol_version="1.0")],
    capabilities=AgentCapabilities(streaming=True),
    default_input_modes=["application/json"], default_output_modes=["application/json"],
    skills=[AgentSkill(id="upper", name="upper", description="upper-cases `text`", tags=["text"])],
)
handler = DefaultRequestHandler(agent_executor=Upper(), task_store=InMemoryTaskStore(), agent_card=card)
app = Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/"))


async def main():
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=PORT, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    print(f"listening {PORT}", flush=True)
    await task


asyncio.run(main())
