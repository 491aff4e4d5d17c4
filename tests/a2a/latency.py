"""What A2A costs over the API for one short run, as a ratio measured in
the same minutes: a blocking `SendMessage` to `/a2a/greet` against
`POST /api/v1/runs {"template": "greet", "wait_ms": ...}` on the same
server, one keep-alive connection each, in alternating blocks (A B B A
...), so drift in the machine's speed falls on both.

Usage: latency.py BASE_URL [RUNS_PER_BLOCK] [BLOCKS]
(`greet` must be saved: tests/a2a's greet template, see docs/a2a.md)
Prints one JSON object: each side's median and p90 in ms, and the ratio.
"""

import json
import statistics
import sys
import time
import uuid

import httpx

BASE = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 100
BLOCKS = int(sys.argv[3]) if len(sys.argv) > 3 else 6


def a2a(c):
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                                   "parts": [{"data": {"name": "Ada"}}]}}}
    r = c.post(f"{BASE}/a2a/greet", json=body).json()
    assert r["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", r


def api(c):
    r = c.post(f"{BASE}/api/v1/runs", json={"template": "greet", "input": {"name": "Ada"}, "wait_ms": 10000}).json()
    assert r["state"] == "completed", r


times = {"a2a": [], "api": []}
with httpx.Client(timeout=30) as ca, httpx.Client(timeout=30) as cb:
    for f, c in ((a2a, ca), (api, cb)):
        for _ in range(20):
            f(c)  # warm up
    order = ["a2a", "api", "api", "a2a"] * ((BLOCKS + 3) // 4)
    for side in order[:BLOCKS]:
        f, c = (a2a, ca) if side == "a2a" else (api, cb)
        for _ in range(N):
            t0 = time.perf_counter()
            f(c)
            times[side].append((time.perf_counter() - t0) * 1000)


def q(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p * len(xs)))], 3)


out = {k: {"median_ms": round(statistics.median(v), 3), "p90_ms": q(v, 0.9), "n": len(v)} for k, v in times.items()}
out["ratio_median"] = round(out["a2a"]["median_ms"] / out["api"]["median_ms"], 3)
print(json.dumps(out))
