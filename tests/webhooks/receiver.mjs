// A webhook receiver that verifies every delivery with the Standard Webhooks
// library from npm (`standardwebhooks`), as a Node user's would.
//
//   node receiver.mjs SECRET PORT_FILE LOG
//
// Each request is one JSON line appended to LOG: {id, type, data, verified}.
// A delivery that does not verify is answered 400, the others 204.
import { createServer } from "node:http";
import { appendFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// Installed with the MCP peers (tests/mcp-peers/package.json).
const require = createRequire(join(dirname(fileURLToPath(import.meta.url)), "../mcp-peers/package.json"));
const { Webhook } = require("standardwebhooks");

const [secret, portFile, log] = process.argv.slice(2);
const hook = new Webhook(secret);
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    let payload, verified;
    try {
      payload = hook.verify(body, req.headers);
      verified = true;
    } catch (e) {
      payload = { error: String(e) };
      verified = false;
    }
    const line = { id: req.headers["webhook-id"], type: payload.type, data: payload.data, verified };
    appendFileSync(log, JSON.stringify(line) + "\n");
    res.writeHead(verified ? 204 : 400);
    res.end();
  });
});
server.listen(0, "127.0.0.1", () => {
  writeFileSync(portFile + ".tmp", String(server.address().port));
  renameSync(portFile + ".tmp", portFile);
});
