"""An A2A client that knows nothing of weft, played by the official Python
SDK (a2a-sdk 1.3): it discovers `weft serve --http`'s agents from their
cards, runs a template, answers its question with invalid then valid
data, streams a second task, cancels a third, drops a stream and resumes
it (SubscribeToTask, and SSE `Last-Event-ID`) with no event lost or
repeated, lists tasks by context, registers a push notification whose
deliveries a local receiver records, and speaks the wrong version.

Every check is an assertion here; what was seen is printed as one JSON
object for the Rust test to check again (host/tests/e2e/a2a.rs).

Usage: sdk_client.py BASE_URL PUSH_PORT
"""

import asyncio
import http.server
import json
import sys
import threading
import uuid

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_data_message, new_text_message
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

BASE, PUSH_PORT = sys.argv[1], int(sys.argv[2])
seen = {}


def state(t):
    return TaskState.Name(t.status.state)


def user_data(data, **kw):
    return new_data_message(data, role=Role.ROLE_USER, **kw)


async def collect(stream):
    out = []
    async for e in stream:
        out.append(MessageToDict(e))
    return out


class Receiver(http.server.BaseHTTPRequestHandler):
    got = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        Receiver.got.append({"path": self.path, "token": self.headers.get("x-a2a-notification-token"),
                             "body": json.loads(body)})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


async def main():
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", PUSH_PORT), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()

    # Discovery: the server's card lists every template as a skill.
    async with httpx.AsyncClient() as h:
        card = (await h.get(f"{BASE}/.well-known/agent-card.json")).json()
    skills = sorted(s["id"] for s in card["skills"])
    assert "approval" in skills and "greet" in skills, card
    seen["skills"] = skills

    blocking = await create_client(f"{BASE}/a2a/approval", client_config=ClientConfig(streaming=False))
    streaming = await create_client(f"{BASE}/a2a/approval")
    assert blocking._card.skills[0].id == "approval"

    # 1. A blocking send returns once the run asks for input: the prompt as
    #    text, the schema in the part's metadata.
    [r] = [e async for e in blocking.send_message(SendMessageRequest(
        message=user_data({"order": "A-1", "amount": 12.5})))]
    task = r.task
    assert state(task) == "TASK_STATE_INPUT_REQUIRED", task
    part = task.status.message.parts[0]
    assert "Approve the refund of 12.5 for order A-1" in part.text, part
    meta = MessageToDict(part.metadata)
    assert meta["step"] == "approve" and meta["schema"]["required"] == ["approved", "by"], meta
    seen["asked"] = part.text
    # What the answer is about: the wait's preview, as an artifact.
    previews = [MessageToDict(a) for a in task.artifacts if a.artifact_id == meta["preview"]]
    assert len(previews) == 1, task.artifacts
    seen["preview"] = previews[0]["parts"][0]["data"]

    # 2. An invalid answer is an A2A error naming the field; the task
    #    still waits.
    try:
        [_ async for _ in blocking.send_message(SendMessageRequest(
            message=user_data({"approved": "yes"}, task_id=task.id, context_id=task.context_id)))]
        raise AssertionError("an invalid answer was taken")
    except InvalidParamsError as e:
        seen["invalid"] = {"message": e.message, "data": e.data}
        assert "/message/parts/0/data" in e.data["path"], e.data
    again = await blocking.get_task(GetTaskRequest(id=task.id))
    assert state(again) == "TASK_STATE_INPUT_REQUIRED", again

    # 3. A valid answer completes it; the output is the final artifact.
    answer = user_data({"approved": True, "by": "ana"}, task_id=task.id, context_id=task.context_id)
    [r] = [e async for e in blocking.send_message(SendMessageRequest(message=answer))]
    done = r.task
    assert state(done) == "TASK_STATE_COMPLETED", done
    # The same answer again (as after a lost reply) is the task, not an error.
    [r] = [e async for e in blocking.send_message(SendMessageRequest(message=answer))]
    assert state(r.task) == "TASK_STATE_COMPLETED" and r.task.id == task.id, r
    output = MessageToDict(done.artifacts[-1])
    assert output["artifactId"] == "output", output
    assert output["parts"][0]["data"]["refunded"] == "Refunded 12.5 for order A-1, approved by ana", output
    seen["output"] = output["parts"][0]["data"]

    # 4. A stream: the task first, then status updates until it asks.
    events = await collect(streaming.send_message(SendMessageRequest(
        message=user_data({"order": "B-2", "amount": 3}))))
    assert "task" in events[0], events
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", events
    # The preview comes just before the question.
    assert events[-2]["artifactUpdate"]["artifact"]["artifactId"] == "preview:approve", events
    streamed = events[0]["task"]["id"]
    # ... and the answer's stream ends with the output and `completed`.
    events2 = await collect(streaming.send_message(SendMessageRequest(
        message=user_data({"approved": False, "by": "bo"}, task_id=streamed))))
    kinds = [next(iter(e)) for e in events2]
    assert events2[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", events2
    assert "artifactUpdate" in kinds, kinds
    art = [e["artifactUpdate"] for e in events2 if "artifactUpdate" in e][-1]
    assert art["artifact"]["parts"][0]["data"]["declined"] == "Refund for order B-2 declined by bo", art
    seen["stream_kinds"] = [next(iter(e)) for e in events] + kinds

    # 5. Cancel: a waiting task ends canceled; canceling again is refused.
    [r] = [e async for e in blocking.send_message(SendMessageRequest(
        message=user_data({"order": "C-3", "amount": 1})))]
    canceled = await blocking.cancel_task(CancelTaskRequest(id=r.task.id))
    assert state(canceled) == "TASK_STATE_CANCELED", canceled
    try:
        await blocking.cancel_task(CancelTaskRequest(id=r.task.id))
        raise AssertionError("a canceled task was canceled again")
    except TaskNotCancelableError:
        pass

    # 6. A dropped stream, resumed: SubscribeToTask's snapshot holds all
    #    that happened meanwhile...
    context = f"ctx-{uuid.uuid4()}"
    req = SendMessageRequest(message=user_data({"order": "D-4", "amount": 9}, context_id=context))
    req.configuration.return_immediately = True
    [r] = [e async for e in blocking.send_message(req)]
    tid = r.task.id
    # Subscribing to a waiting task follows it through its answer.
    sub = streaming.subscribe(SubscribeToTaskRequest(id=tid))
    first = await sub.__anext__()
    assert first.HasField("task"), first
    following = asyncio.ensure_future(collect(sub))
    await asyncio.sleep(0.2)
    assert not following.done(), "the subscription ended while the task waits"
    await blocking.send_message(SendMessageRequest(
        message=user_data({"approved": True, "by": "cy"}, task_id=tid))).__anext__()
    followed = await asyncio.wait_for(following, 20)
    assert followed[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", followed
    snap = await blocking.get_task(GetTaskRequest(id=tid))
    assert state(snap) == "TASK_STATE_COMPLETED"
    # ... and over SSE, `Last-Event-ID` resumes after the last event seen:
    # a stream dropped after two events, resumed, holds exactly what one
    # unbroken stream holds.
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": tid}}
    hdrs = {"A2A-Version": "1.0", "Accept": "text/event-stream"}

    async def events_after(last, stop_after=None):
        out = []
        async with httpx.AsyncClient(timeout=30) as h:
            async with h.stream("POST", f"{BASE}/a2a/approval", json=rpc,
                                headers={**hdrs, "Last-Event-ID": str(last)}) as resp:
                ev = {}
                async for line in resp.aiter_lines():
                    if line.startswith("id:"):
                        ev["id"] = int(line[3:].strip())
                    elif line.startswith("data:"):
                        ev["data"] = json.loads(line[5:])["result"]
                    elif line == "" and ev:
                        out.append(ev)
                        ev = {}
                        if stop_after and sum(1 for e in out if "id" in e) >= stop_after:
                            break
        return out

    whole = await events_after(0)
    head = await events_after(0, stop_after=2)
    tail = await events_after(head[-1]["id"])
    assert head + tail == whole, (head, tail, whole)
    ids = [e["id"] for e in whole if "id" in e]
    assert ids == sorted(set(ids)), ids
    assert whole[-1]["data"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", whole
    assert not any("task" in e["data"] for e in whole), "a resumed stream sends no snapshot again"
    seen["resumed"] = {"head": [e.get("id") for e in head], "tail": [e.get("id") for e in tail]}

    # 7. Tasks by context.
    page = await blocking.list_tasks(ListTasksRequest(context_id=context))
    assert [t.id for t in page.tasks] == [tid], page
    seen["listed_total"] = page.total_size

    # 8. Text where the skill takes one string field; refused where not.
    greet = await create_client(f"{BASE}/a2a/greet", client_config=ClientConfig(streaming=False))
    [r] = [e async for e in greet.send_message(SendMessageRequest(
        message=new_text_message("Ada", role=Role.ROLE_USER)))]
    assert state(r.task) == "TASK_STATE_COMPLETED", r.task
    seen["greeted"] = MessageToDict(r.task.artifacts[-1])["parts"][0]["data"]
    try:
        [_ async for _ in blocking.send_message(SendMessageRequest(
            message=new_text_message("refund A-1", role=Role.ROLE_USER)))]
        raise AssertionError("text was taken by a skill of two fields")
    except ContentTypeNotSupportedError as e:
        assert e.data["path"] == "/message/parts/0", e.data

    # 9. Push notifications: an allowed URL gets the task's updates, with
    #    its token; another is refused before anything runs.
    pushed = await create_client(f"{BASE}/a2a/approval", client_config=ClientConfig(
        streaming=False,
        push_notification_config=TaskPushNotificationConfig(
            url=f"http://127.0.0.1:{PUSH_PORT}/push/t1", token="tok-1", id="p1")))
    [r] = [e async for e in pushed.send_message(SendMessageRequest(
        message=user_data({"order": "E-5", "amount": 2})))]
    ptask = r.task.id
    [_ async for _ in blocking.send_message(SendMessageRequest(
        message=user_data({"approved": True, "by": "di"}, task_id=ptask)))]
    for _ in range(100):
        states = [g["body"]["statusUpdate"]["status"]["state"] for g in Receiver.got
                  if g["body"]["statusUpdate"]["taskId"] == ptask]
        if "TASK_STATE_COMPLETED" in states:
            break
        await asyncio.sleep(0.1)
    assert states == ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"], Receiver.got
    assert all(g["token"] == "tok-1" and g["path"] == "/push/t1" for g in Receiver.got), Receiver.got
    seen["pushed"] = states
    configs = await pushed.list_task_push_notification_configs(
        __import__("a2a.types.a2a_pb2", fromlist=["x"]).ListTaskPushNotificationConfigsRequest(task_id=ptask))
    assert [c.url for c in configs.configs] == [f"http://127.0.0.1:{PUSH_PORT}/push/t1"], configs
    elsewhere = await create_client(f"{BASE}/a2a/approval", client_config=ClientConfig(
        streaming=False, push_notification_config=TaskPushNotificationConfig(url="http://169.254.169.254/x")))
    before = (await blocking.list_tasks(ListTasksRequest())).total_size
    try:
        [_ async for _ in elsewhere.send_message(SendMessageRequest(
            message=user_data({"order": "F-6", "amount": 2})))]
        raise AssertionError("a push URL the operator did not allow was taken")
    except InvalidParamsError as e:
        seen["push_refused"] = e.message
        assert e.data["path"].endswith("/url"), e.data
    after = (await blocking.list_tasks(ListTasksRequest())).total_size
    assert after == before, "a refused message started nothing"

    # 9b. A configuration added to a task that runs gets the updates after
    #     it; one added then deleted gets none; a task that ended takes none.
    [r] = [e async for e in blocking.send_message(SendMessageRequest(
        message=user_data({"order": "G-7", "amount": 4})))]
    late = r.task.id
    made = await blocking.create_task_push_notification_config(TaskPushNotificationConfig(
        task_id=late, id="late", url=f"http://127.0.0.1:{PUSH_PORT}/push/late", token="tok-late"))
    assert made.id == "late" and made.task_id == late and made.token == "tok-late", made
    await blocking.create_task_push_notification_config(TaskPushNotificationConfig(
        task_id=late, id="gone", url=f"http://127.0.0.1:{PUSH_PORT}/push/gone", token="tok-gone"))
    await blocking.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=late, id="gone"))
    listed = await blocking.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=late))
    assert [c.id for c in listed.configs] == ["late"], listed
    [_ async for _ in blocking.send_message(SendMessageRequest(
        message=user_data({"approved": True, "by": "eve"}, task_id=late)))]
    for _ in range(100):
        late_states = [g["body"]["statusUpdate"]["status"]["state"] for g in Receiver.got if g["path"] == "/push/late"]
        if "TASK_STATE_COMPLETED" in late_states:
            break
        await asyncio.sleep(0.1)
    assert late_states == ["TASK_STATE_COMPLETED"], Receiver.got
    assert all(g["token"] == "tok-late" for g in Receiver.got if g["path"] == "/push/late"), Receiver.got
    assert not [g for g in Receiver.got if g["path"] == "/push/gone"], Receiver.got
    seen["added_later"] = late_states
    try:
        await blocking.create_task_push_notification_config(TaskPushNotificationConfig(
            task_id=late, id="after", url=f"http://127.0.0.1:{PUSH_PORT}/push/after"))
        raise AssertionError("a configuration was added to an ended task")
    except UnsupportedOperationError as e:
        seen["ended_refused"] = e.message

    # 10. An A2A 0.3 method name: told which version this server speaks.
    async with httpx.AsyncClient() as h:
        old = (await h.post(f"{BASE}/a2a/approval", json={
            "jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {}})).json()
    assert old["error"]["code"] == -32009, old
    seen["v03"] = old["error"]["message"]

    receiver.shutdown()
    print(json.dumps(seen))


asyncio.run(main())
