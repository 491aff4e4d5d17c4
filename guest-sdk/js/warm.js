// The build-time warm-up: every invocation of a component starts from the
// snapshot componentize-js takes after the module ran, and a function the
// snapshot holds only as source is compiled again by each invocation that
// calls it. So once, before the snapshot, this runs what every invocation
// runs besides the step's own function: the SDK's path (glue, JSON in and
// out, the fast parsers, log and progress) on a probe step, with the host
// functions doing nothing, and the builtins steps use most. Their bytecode
// is then in the snapshot. Then the same for the code componentize-js's own
// bindings run around each call, in their realm (`bindingsRealm`). It
// leaves nothing behind that a step could see.
import { __glue, __precomputed, __quietly, log, progress, step, z } from './index.js';

const PROBE = 'weft-warm-up';

/** `imports` are the WIT host functions the component was given. */
export function warmUp(imports) {
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
  bindingsRealm(imports.log);
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

/**
 * componentize-js's bindings call `run` from an `async` function in a
 * global of their own (a realm: their `TextDecoder` and the host functions
 * come from it). A realm makes its built-ins on first use (the Promise
 * constructor and prototype, typed arrays, BigInt, String's methods...),
 * and nothing used that realm before the snapshot, so every call made
 * them again: a third of the pages a call touched, and more time than the
 * whole SDK path. This runs what those bindings run around a call, in
 * their realm, once. A host function leads there: its constructor is that
 * realm's `Function`. (Were the bindings in the step's realm, it would
 * run in ours, harmlessly.) Returns what the made-up calls wrote (for the
 * unit test); the build drains the job queue after the module ran, so the
 * awaited parts run before the snapshot too.
 */
export function bindingsRealm(hostFunction) {
  const RealmFunction = hostFunction.constructor;
  return RealmFunction('TextDecoder', 'TextEncoder', BINDINGS_CALL)(TextDecoder, TextEncoder);
}

// The shape of componentize-js's `export_run` (0.23) on a made-up call and
// on a failing one: strings decoded from and encoded into memory, a u32
// and a u64 parameter, the awaited call, the result's variant checks and
// writes through a DataView.
const BINDINGS_CALL = `
  const memory = new ArrayBuffer(256);
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  const decode = (ptr, len) => decoder.decode(new Uint8Array(memory, ptr, len));
  const encode = (s, ptr) => {
    if (typeof s !== 'string') throw new TypeError('expected a string, received [' + typeof s + ']');
    let len = 0;
    for (let i = 0; i < s.length; i++) {
      const ch = s.charCodeAt(i);
      if (ch < 0x80) len += 1;
      else if (ch < 0x800) len += 2;
      else if (ch >= 0xd800 && ch <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
        len += 4;
        i++;
      } else len += 3;
    }
    const { read, written } = encoder.encodeInto(s, new Uint8Array(memory, ptr, len));
    if (read !== s.length || written !== len) throw new Error('failed to encode whole string');
    return { ptr, len, codepoints: s.length };
  };
  const payload = (e) => {
    if (e && Object.prototype.hasOwnProperty.call(e, 'payload')) return e.payload;
    if (e instanceof Error) throw e;
    return e;
  };
  encode('{"k": [1, "é"]}', 0);
  const call = async (attempt, deadline, fail) => {
    globalThis?.process?.env?.JCO_DEBUG;
    const ctx = {
      runId: decode(0, 3),
      step: decode(3, 3),
      attempt: attempt >>> 0,
      idempotencyKey: decode(6, 3),
      deadlineMs: BigInt.asUintN(64, BigInt(deadline)),
    };
    let ret;
    try {
      const got = await (fail ? Promise.reject({ code: 'c', message: \`m \${ctx.attempt}\`, retryable: false }) : { tag: 'done', val: decode(0, 16) });
      ret = got !== null && typeof got === 'object' && (got.tag === 'ok' || got.tag === 'err') ? got : { tag: 'ok', val: got };
    } catch (e) {
      ret = { tag: 'err', val: payload(e) };
    }
    const view = new DataView(memory);
    switch (ret.tag) {
      case 'ok': {
        view.setInt8(128, 0, true);
        const { ptr, len } = encode(ret.val.val, 140);
        view.setUint32(132, ptr, true);
        view.setUint32(136, len, true);
        return [decode(view.getUint32(132, true), view.getUint32(136, true))];
      }
      case 'err': {
        view.setInt8(128, 1, true);
        const { code, message, retryable } = ret.val;
        view.setUint32(132, encode(code, 140).len, true);
        view.setUint32(136, encode(message, 160).len, true);
        view.setInt8(148, retryable ? 1 : 0, true);
        return [decode(140, view.getUint32(132, true)), decode(160, view.getUint32(136, true)), view.getInt8(148)];
      }
      default:
        throw new TypeError('invalid variant specified for result');
    }
  };
  return Promise.all([call(1, 0n, false), call(2, 5n, true)]);
`;
