// The component side natively: schemas made at build time are used, the
// build-time warm-up leaves nothing a step could see, and it warms the
// realm of componentize-js's bindings up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import vm from 'node:vm';

import { __component, __precomputed } from '../component.js';
import { step, z, log } from '../index.js';
import { bindingsRealm } from '../warm.js';

test('a step takes the JSON Schemas made at build time for its name, and makes its own otherwise', () => {
  __precomputed({ 'pre-made': { inputSchema: '{"made":"at build time"}', outputSchema: '{"out":1}' } });
  const spec = { input: z.object({ a: z.string() }), output: z.object({ b: z.number() }) };
  const made = step({ name: 'pre-made', ...spec }, ({ a }) => ({ b: a.length }));
  assert.equal(made.metadata.inputSchema, '{"made":"at build time"}');
  assert.equal(made.metadata.outputSchema, '{"out":1}');
  const own = step({ name: 'not-pre-made', ...spec }, ({ a }) => ({ b: a.length }));
  assert.equal(JSON.parse(own.metadata.inputSchema).properties.a.type, 'string');
  // The schemas only stand in for the text: parsing still uses the zod schemas.
  assert.deepEqual(made.callJson({ a: 'xyz' }), { b: 3 });
});

test('the warm-up calls no host function, and the step then logs through the host as before', () => {
  const calls = [];
  const imports = {
    log: (level, message) => calls.push(['log', level, message]),
    progress: (message) => calls.push(['progress', message]),
    artifact: (name) => calls.push(['artifact', name]),
  };
  const s = step({ name: 'greet', input: z.object({ who: z.string() }) }, ({ who }, ctx) => {
    log(`hello ${who} from ${ctx.step}`);
    return `hi ${who}`;
  });
  const glue = __component(s, imports, { version: '1.2.3' });
  assert.deepEqual(calls, [], 'the warm-up reached the host');
  assert.equal(glue.describe().version, '1.2.3');
  const ctx = { runId: 'r_1', step: 'greet', attempt: 1, idempotencyKey: 'k', deadlineMs: 5n };
  assert.deepEqual(glue.run(ctx, '{"who": "Ada"}'), { tag: 'ok', val: { tag: 'done', val: '"hi Ada"' } });
  assert.deepEqual(calls, [['log', 'info', 'hello Ada from greet']]);
  assert.equal(RegExp.$1, '', 'the warm-up left a RegExp match behind');
  const probeName = step({ name: 'weft-warm-up', input: z.object({ who: z.string() }) }, () => null);
  assert.equal(JSON.parse(probeName.metadata.inputSchema).properties.who.type, 'string', 'the warm-up left its schemas behind');
});

test("the warm-up of the bindings' realm runs there, as their calls do", async () => {
  // A function from another realm, as the host functions componentize-js
  // hands over are: the warm-up runs in its realm, not in ours.
  const realm = vm.createContext({});
  const hostFunction = vm.runInContext('(function log() {})', realm);
  const before = Object.keys(realm);
  const got = bindingsRealm(hostFunction);
  assert.equal(got instanceof Promise, false, 'the calls ran in this realm, not the host function’s');
  assert.ok(got instanceof vm.runInContext('Promise', realm));
  // What the made-up calls wrote into memory and read back: the result of
  // one, the step error of the other (arrays of that realm, hence JSON).
  assert.deepEqual(JSON.parse(JSON.stringify(await got)), [['{"k": [1, "é"]}'], ['c', 'm 2', 0]]);
  assert.deepEqual(Object.keys(realm), before, 'the warm-up left a global behind');
});
