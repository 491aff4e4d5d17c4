// The Restate side of `weft bench w9 --peer-restate`: the W9 workloads as a
// Restate service. `POST /Chain/chain40` makes 40 steps and `/Chain/trivial3`
// 3, one after another, each a journaled `ctx.run` (restate-server persists
// its result before the handler goes on), as each of weft's runs makes 40 or
// 3 code steps that select field `a` of `{"a": i}`. A handler returns its last
// step's value (39 or 2), which the bench checks.
//
// usage: node service.mjs [PORT]   (default 9080; listens on 127.0.0.1)

// @restatedev/restate-sdk 1.17 calls Promise.withResolvers (ES2024), which
// Node 22 has and Node 20 does not; the standard behaviour, where missing.
if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function () {
    let resolve, reject;
    const promise = new this((ok, fail) => {
      resolve = ok;
      reject = fail;
    });
    return { promise, resolve, reject };
  };
}

const restate = await import("@restatedev/restate-sdk");
const http2 = await import("node:http2");

async function steps(ctx, n) {
  let last;
  for (let i = 0; i < n; i++) {
    last = await ctx.run(`s${i}`, () => ({ a: i }).a);
  }
  return last;
}

const chain = restate.service({
  name: "Chain",
  handlers: {
    chain40: async (ctx) => steps(ctx, 40),
    trivial3: async (ctx) => steps(ctx, 3),
  },
});

const port = Number(process.argv[2] ?? 9080);
const server = http2.createServer(restate.createEndpointHandler({ services: [chain] }));
server.listen(port, "127.0.0.1", () => console.log(`listening on 127.0.0.1:${port}`));
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
