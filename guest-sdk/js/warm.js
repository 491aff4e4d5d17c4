// The build-time warm-up: every invocation of a component starts from the
// snapshot componentize-js takes after the module ran, and a function the
// snapshot holds only as source is compiled again by each invocation that
// calls it. So once, before the snapshot, this runs what every invocation
// runs besides the step's own function: the SDK's path (glue, JSON in and
// out, the fast parsers, log and progress) on a probe step, with the host
// functions doing nothing, and the builtins steps use most. Their bytecode
// is then in the snapshot. It leaves nothing behind that a step could see.
import { __glue, __precomputed, __quietly, log, progress, step, z } from './index.js';

const PROBE = 'weft-warm-up';

export function warmUp() {
  __quietly(() => {
    // The probe's schemas are never shown: do not run zod's generator for them.
    __precomputed({ [PROBE]: { inputSchema: '{}', outputSchema: '{}' } });
    const probe = step(
      {
        name: PROBE,
        input: z.strictObject({
          s: z.string().max(9).default('-'),
          n: z.number().int().min(0).default(1),
          f: z.number().optional(),
          b: z.boolean().nullable(),
          a: z.array(z.string()),
          e: z.enum(['x', 'y']),
          u: z.union([z.literal('z'), z.number()]),
          o: z.object({ k: z.unknown() }).loose(),
        }),
        output: z.object({ s: z.string(), n: z.number().int(), a: z.array(z.string()) }),
      },
      ({ s, n, a }, ctx) => {
        log(`${ctx.step} ${s}`);
        log.info(s);
        progress(s);
        return { s, n, a };
      },
    );
    __precomputed({ [PROBE]: null });
    const ctx = { runId: '', step: PROBE, attempt: 1, idempotencyKey: '', deadlineMs: 0n };
    __glue(probe).run(ctx, '{"b": null, "a": ["p"], "e": "x", "u": 1, "o": {"k": 2, "m": 3}}');
    builtins();
  });
}

/** Array, string, RegExp, Object, Map/Set and JSON methods, once each. */
function builtins() {
  const a = [3, 1, 2];
  a.map((x) => x).filter((x) => x > 1).forEach(() => {});
  a.some((x) => x > 2) && a.every((x) => x > 0) && a.reduce((t, x) => t + x, 0);
  a.find((x) => x === 1) ?? a.findIndex((x) => x === 2);
  a.includes(2) && a.indexOf(1) && a.join(',') && a.slice(1).concat([4]).sort((x, y) => x - y);
  [[1], [2]].flat().flatMap((x) => [x]);
  Array.from(a, (x) => x);
  for (const x of [...a]) x;
  const s = 'Hello, Wörld';
  s.split(/[\s,]+/u).concat(s.split(','));
  s.replace(/o/g, '0') + s.replace('H', 'h') + s.replace(/l/g, (m) => m) + s.replaceAll('l', 'L');
  s.match(/o/g) && [...s.matchAll(/o/g)] && /o/.test(s) && /(o)/.exec(s);
  s.toLowerCase() + s.toUpperCase() + s.trim() + s.padStart(20) + s.padEnd(20) + s.at(-1);
  s.startsWith('H') && s.endsWith('d') && s.includes('W');
  for (const c of [...s]) c.charCodeAt(0);
  Object.fromEntries(Object.entries({ k: 1 }).map(([k, v]) => [k, v]));
  Object.keys({}).concat(Object.values({}));
  Object.assign({}, { k: 1 });
  new Map([[1, 2]]).forEach(() => {});
  for (const [k] of new Map([[1, 2]])) k;
  for (const k of new Set([1])) k;
  JSON.stringify(JSON.parse('{"k": [1, "2", null]}'));
  // Leaves RegExp's legacy statics (RegExp.$1...) as a fresh engine has them.
  /(?:)/.exec('');
}
