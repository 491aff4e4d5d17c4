"""Real calls through the Python client openapi-python-client generated from
weft's OpenAPI document (host/tests/e2e/api_clients.rs generates it into
CLIENT_DIR): start a run and wait for it, read it, list runs, page its
events, retry it, and read an error as the typed ApiError.

Usage: use_client.py CLIENT_DIR BASE_URL   (prints one JSON object)
"""

import json
import sys

sys.path.insert(0, sys.argv[1])
from weft_client import Client  # noqa: E402
from weft_client.api.default import get_run, list_run_events, list_runs, retry_run, start_run  # noqa: E402
from weft_client.models import ApiError, ListRunsState, RetryBody, StartBody  # noqa: E402

c = Client(base_url=sys.argv[2] + "/api/v1", raise_on_unexpected_status=True)
seen = {}
body = StartBody.from_dict({"definition": {"name": "g", "steps": [{"name": "a", "return": {"x": "@input.x"}}]},
                            "input": {"x": 1}, "wait_ms": 10000})
started = start_run.sync_detailed(client=c, body=body)
run = started.parsed
seen["started"] = {"status": int(started.status_code), "state": str(run.state), "output": run.output if isinstance(run.output, dict) else run.output.to_dict()}
again = get_run.sync(run.id, client=c)
seen["steps"] = [s.name for s in again.steps]
page = list_runs.sync(client=c, limit=10, state=ListRunsState.COMPLETED)
seen["listed"] = [r.id for r in page.runs]
seen["events"] = [e.kind for e in list_run_events.sync(run.id, client=c).events]
retried = retry_run.sync_detailed(run.id, client=c, body=RetryBody.from_dict({"from": "a", "wait_ms": 10000}))
seen["retried"] = {"status": int(retried.status_code), "state": str(retried.parsed.run.state),
                   "again": retried.parsed.again}
bad = get_run.sync_detailed("r_nope", client=c)
seen["error"] = {"status": int(bad.status_code), "typed": isinstance(bad.parsed, ApiError),
                 "kind": bad.parsed.kind, "message": bad.parsed.message}
seen["run_id"] = run.id
print(json.dumps(seen))
