// The component side natively: schemas made at build time are used, and the
// build-time warm-up leaves nothing a step could see.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { __component, __precomputed } from '../component.js';
import { step, z, log } from '../index.js';

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
