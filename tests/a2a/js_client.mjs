// The official JavaScript SDK (@a2a-js/sdk 1.3) as an A2A client of
// `weft serve --http`: over JSON-RPC and over HTTP+JSON it resolves a
// template's card, sends a text message to `greet` (blocking), then
// streams `approval` to its question and streams the answer to the end.
// Assertions here; what was seen is printed as JSON for the Rust test.
//
// Usage: node js_client.mjs BASE_URL  (run from tests/mcp-peers, where
// node_modules holds the SDK)
import { createRequire } from "node:module";
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";

const require = createRequire(process.cwd() + "/");
const { Role, TaskState } = require("@a2a-js/sdk");
const { ClientFactory, ClientFactoryOptions } = require("@a2a-js/sdk/client");

const base = process.argv[2];
const seen = {};
const msg = (content, extra = {}) => ({
  message: {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content, metadata: undefined, filename: "", mediaType: "" }],
    contextId: "",
    taskId: "",
    extensions: [],
    referenceTaskIds: [],
    metadata: undefined,
    ...extra,
  },
});

for (const binding of ["JSONRPC", "HTTP+JSON"]) {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] }),
  );
  const greet = await factory.createFromUrl(`${base}/a2a/greet/`);
  const r = await greet.sendMessage(msg({ $case: "text", value: "Grace" }));
  const task = r.task ?? r.payload?.value ?? r;
  assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(r));
  const out = task.artifacts.at(-1).parts[0].content;
  assert.equal(out.$case, "data");
  assert.equal(out.value.greeting, "Hello, Grace!");

  const approval = await factory.createFromUrl(`${base}/a2a/approval/`);
  const kinds = [];
  let id;
  let last;
  for await (const e of approval.sendMessageStream(msg({ $case: "data", value: { order: "J-1", amount: 4 } }))) {
    const p = e.payload ?? e;
    kinds.push(p.$case);
    if (p.$case === "task") id = p.value.id;
    last = p;
  }
  assert.equal(last.$case, "statusUpdate", JSON.stringify(last));
  assert.equal(last.value.status.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  assert.match(last.value.status.message.parts[0].content.value, /Approve the refund of 4 for order J-1/);
  const answer = msg({ $case: "data", value: { approved: true, by: "js" } });
  answer.message.taskId = id;
  let output;
  for await (const e of approval.sendMessageStream(answer)) {
    const p = e.payload ?? e;
    kinds.push(p.$case);
    if (p.$case === "artifactUpdate") output = p.value.artifact.parts[0].content.value;
    last = p;
  }
  assert.equal(last.value.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(output.refunded, "Refunded 4 for order J-1, approved by js");
  seen[binding] = { greeting: out.value.greeting, kinds, refunded: output.refunded };
}
console.log(JSON.stringify(seen));
