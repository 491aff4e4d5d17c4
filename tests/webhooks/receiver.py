"""A webhook receiver that verifies every delivery with the Standard Webhooks
reference library (`standardwebhooks` from PyPI), as a weft user's would.

    python receiver.py --secret whsec_... --port-file F --log L [--fail N] [--hold S]
                       [--jitter-ms M]

Each request is one JSON line appended to L: {"id", "timestamp", "type", "data",
"verified", "try", "status", "in_flight"} where `try` counts the requests seen
for that `webhook-id` (1, 2, ...) and `in_flight` the requests not yet
answered when it came (itself included). A delivery that does not verify is answered 400.
--fail N: the first N tries of each id are answered 500 (after verifying).
--hold S: the first try of each id is held S seconds before it is answered
(the receipt is logged at once: a test kills the sender meanwhile).
--jitter-ms M: every answer waits a random 0..M ms (exposes reordering).
The port it listens on (127.0.0.1, chosen by the OS) is written to F.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--secret", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--fail", type=int, default=0)
    ap.add_argument("--hold", type=float, default=0.0)
    ap.add_argument("--jitter-ms", type=int, default=0)
    args = ap.parse_args()
    hook = Webhook(args.secret)
    lock = threading.Lock()
    tries: dict[str, int] = {}
    in_flight = [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
            headers = {k.lower(): v for k, v in self.headers.items()}
            msg_id = headers.get("webhook-id", "")
            try:
                payload = hook.verify(body, headers)
                verified = True
            except WebhookVerificationError as e:
                payload, verified = {"error": str(e)}, False
            with lock:
                tries[msg_id] = tries.get(msg_id, 0) + 1
                n = tries[msg_id]
                in_flight[0] += 1
                busy = in_flight[0]
            status = 400 if not verified else (500 if n <= args.fail else 200)
            line = {"id": msg_id, "timestamp": headers.get("webhook-timestamp"), "verified": verified,
                    "try": n, "status": status, "type": payload.get("type"), "data": payload.get("data"), "in_flight": busy}
            with lock, open(args.log, "a") as f:
                f.write(json.dumps(line) + "\n")
            if args.hold and n == 1:
                time.sleep(args.hold)
            if args.jitter_ms:
                time.sleep(random.random() * args.jitter_ms / 1000.0)
            # Answered from here on: a sender that waits for the answer
            # before its next request never finds another one in flight.
            with lock:
                in_flight[0] -= 1
            self.send_response(status)
            self.send_header("content-type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok" if status == 200 else b"no")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
