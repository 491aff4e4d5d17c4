// Real calls through the TypeScript client @hey-api/openapi-ts generated
// from weft's OpenAPI document (compiled by tsc, strict; see
// host/tests/e2e/api_clients.rs). Usage: node out/use.js BASE_URL
import { client } from "./gen/client.gen.js";
import { getRun, listRunEvents, listRuns, retryRun, startRun } from "./gen/sdk.gen.js";

const base = process.argv[2];
client.setConfig({ baseUrl: base + "/api/v1" });
const definition = { name: "g", steps: [{ name: "a", return: { x: "@input.x" } }] };
const started = await startRun({ body: { definition, input: { x: 1 }, wait_ms: 10000 } });
if (!started.data) throw new Error("startRun: " + JSON.stringify(started.error));
const run = started.data;
const again = await getRun({ path: { id: run.id } });
const page = await listRuns({ query: { state: "completed", limit: 10 } });
const events = await listRunEvents({ path: { id: run.id } });
const retried = await retryRun({ path: { id: run.id }, body: { from: "a", wait_ms: 10000 } });
const bad = await getRun({ path: { id: "r_nope" } });
console.log(JSON.stringify({
  started: { status: started.response?.status, state: run.state, output: run.output },
  steps: again.data?.steps.map((s) => s.name),
  listed: page.data?.runs.map((r) => r.id),
  events: events.data?.events.map((e) => e.kind),
  retried: { status: retried.response?.status, state: retried.data?.run.state, again: retried.data?.again },
  error: { status: bad.response?.status, kind: bad.error?.kind, message: bad.error?.message },
  run_id: run.id,
}));
