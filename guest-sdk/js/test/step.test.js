// The SDK natively: schemas, validation naming the field, error mapping,
// rejection, host functions on stderr, and the component glue.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { step, z, StepError, Rejection, reject, log, progress, artifact, testContext, __component } from '../index.js';

/** Runs `f`, asserts it throws an instance of `cls`, and returns what it threw. */
function caught(f, cls) {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof cls, `expected a ${cls.name}, got ${e}`);
    return e;
  }
  assert.fail(`expected a ${cls.name} to be thrown`);
}

const Item = z.object({ sku: z.string(), qty: z.number().int().min(0).describe('How many') });

const order = step(
  {
    name: 'order-total',
    description: '  Sum an order.  ',
    input: z.object({
      items: z.array(Item).min(1),
      currency: z.enum(['EUR', 'USD']).default('EUR'),
    }),
    output: z.object({ total: z.number(), currency: z.string(), attempt: z.number().int() }),
  },
  (input, ctx) => {
    log(`summing ${input.items.length} items`);
    log.warn('prices are made up');
    progress('half way');
    artifact('note.txt', 'text/plain', 'hi');
    if (input.items.some((i) => i.sku === 'spam')) reject('spam order');
    if (input.items.some((i) => i.sku === 'busy')) throw StepError.retryable('busy', 'the price list is busy');
    if (input.items.some((i) => i.sku === 'boom')) throw new Error('kaboom');
    if (input.items.some((i) => i.sku === 'bad-out')) return { total: 'many', currency: input.currency, attempt: ctx.attempt };
    const total = input.items.reduce((sum, i) => sum + i.qty * 2.5, 0);
    return { total, currency: input.currency, attempt: ctx.attempt };
  },
);

test('metadata carries the name, the trimmed description and JSON Schemas of input and output', () => {
  const m = order.metadata;
  assert.equal(m.name, 'order-total');
  assert.equal(m.description, 'Sum an order.');
  assert.equal(m.version, undefined);
  const input = JSON.parse(m.inputSchema);
  assert.equal(input.type, 'object');
  assert.deepEqual(input.required, ['items']);
  assert.equal(input.properties.items.minItems, 1);
  assert.equal(input.properties.items.items.properties.qty.description, 'How many');
  assert.equal(input.properties.currency.default, 'EUR');
  const output = JSON.parse(m.outputSchema);
  assert.deepEqual(output.required, ['total', 'currency', 'attempt']);
});

test('callJson parses, applies defaults and returns the output', () => {
  const out = order.callJson({ items: [{ sku: 'a', qty: 2 }, { sku: 'b', qty: 1 }] });
  assert.deepEqual(out, { total: 7.5, currency: 'EUR', attempt: 1 });
  const ctx = testContext({ attempt: 3 });
  assert.equal(order.callJson({ items: [{ sku: 'a', qty: 0 }], currency: 'USD' }, ctx).attempt, 3);
});

test('a wrong input is invalid_input naming the field', () => {
  const e = caught(() => order.callJson({ items: [{ sku: 'a', qty: 1 }, { sku: 'b', qty: 2 }, { sku: 'c', qty: 'x' }] }), StepError);
  assert.equal(e.code, 'invalid_input');
  assert.equal(e.retryable, false);
  assert.equal(e.message, 'input.items[2].qty: expected number, got string');
  const missing = caught(() => order.callJson({ items: [{ qty: 1 }] }), StepError);
  assert.equal(missing.message, 'input.items[0].sku: missing (expected string)');
  const many = caught(() => order.callJson({ items: [], currency: 'GBP' }), StepError);
  assert.match(many.message, /^input\.items: .*1.*; input\.currency: .*"EUR"\|"USD"/);
  const notObject = caught(() => order.callJson([1]), StepError);
  assert.equal(notObject.message, 'input: expected object, got array');
  const strict = step({ name: 'strict', input: z.strictObject({ a: z.string() }) }, (i) => i.a);
  assert.equal(caught(() => strict.callJson({ a: 'x', b: 1, 'c d': 2 }), StepError).message, 'input: unknown field(s): b, c d');
});

test('text that is not JSON is invalid_input; empty input is null', () => {
  const e = caught(() => order.call('{"items": ['), StepError);
  assert.equal(e.code, 'invalid_input');
  assert.match(e.message, /^input is not JSON: /);
  const anything = step({ name: 'anything', input: z.unknown() }, (i) => ({ got: i }));
  assert.deepEqual(anything.call('  '), { tag: 'done', val: '{"got":null}' });
});

test('reject, a StepError, a thrown Error and a wrong output', () => {
  assert.deepEqual(order.call(JSON.stringify({ items: [{ sku: 'spam', qty: 1 }] })), { tag: 'reject', val: 'spam order' });
  const r = caught(() => order.callJson({ items: [{ sku: 'spam', qty: 1 }] }), Rejection);
  assert.equal(r.reason, 'spam order');
  const busy = caught(() => order.callJson({ items: [{ sku: 'busy', qty: 1 }] }), StepError);
  assert.deepEqual([busy.code, busy.retryable], ['busy', true]);
  const boom = caught(() => order.callJson({ items: [{ sku: 'boom', qty: 1 }] }), StepError);
  assert.deepEqual([boom.code, boom.message, boom.retryable], ['internal', 'step order-total failed: kaboom', false]);
  const bad = caught(() => order.callJson({ items: [{ sku: 'bad-out', qty: 1 }] }), StepError);
  assert.deepEqual([bad.code, bad.message], ['invalid_output', 'output.total: expected number, got string']);
});

test('the output schema strips what it does not declare; no output schema passes the value through', () => {
  const s = step({ name: 'strip', input: z.object({}), output: z.object({ a: z.number() }) }, () => ({ a: 1, secret: 2 }));
  assert.deepEqual(s.callJson({}), { a: 1 });
  const free = step({ name: 'free', input: z.object({}) }, () => ({ a: 1, b: [true] }));
  assert.deepEqual(free.callJson({}), { a: 1, b: [true] });
  assert.equal(free.metadata.outputSchema, undefined);
  const asyncStep = step({ name: 'async', input: z.object({}) }, async () => 1);
  assert.match(caught(() => asyncStep.callJson({}), StepError).message, /must be synchronous/);
});

test('a mistaken declaration says what to write', () => {
  assert.throws(() => step({ name: 'Bad Name', input: z.object({}) }, () => 1), /name must be lower case/);
  assert.throws(() => step({ name: 'x', input: { type: 'object' } }, () => 1), /input must be a zod schema/);
  assert.throws(() => step({ name: 'x', input: z.object({}) }), /second argument must be the step function/);
  assert.throws(() => log('x', 'loud'), /log level must be one of/);
  assert.throws(() => artifact('a', 'text/plain', 5), /data must be a string/);
});

test('the component glue maps outcomes and errors to the WIT shapes and routes host calls', () => {
  const calls = [];
  const imports = {
    log: (level, message) => calls.push(['log', level, message]),
    progress: (message) => calls.push(['progress', message]),
    artifact: (name, mime, data) => calls.push(['artifact', name, mime, [...data]]),
  };
  const c = __component(order, imports, { version: '1.2.3', description: 'from package.json' });
  {
    const d = c.describe();
    assert.deepEqual([d.name, d.description, d.version], ['order-total', 'Sum an order.', '1.2.3']);
    assert.equal(typeof d.inputSchema, 'string');
    const ctx = { runId: 'r_1', step: 's', attempt: 2, idempotencyKey: 'r_1/s/2', deadlineMs: 1700000000000n };
    const ok = c.run(ctx, JSON.stringify({ items: [{ sku: 'a', qty: 2 }] }));
    assert.deepEqual(ok, { tag: 'ok', val: { tag: 'done', val: '{"total":5,"currency":"EUR","attempt":2}' } });
    assert.deepEqual(c.run(ctx, '{"items": [{"sku": "spam", "qty": 1}]}'), { tag: 'ok', val: { tag: 'reject', val: 'spam order' } });
    let thrown;
    try {
      c.run(ctx, '{"items": [{"sku": "busy", "qty": 1}]}');
    } catch (e) {
      thrown = e;
    }
    assert.deepEqual(thrown, { code: 'busy', message: 'the price list is busy', retryable: true });
    assert.ok(!(thrown instanceof Error), 'a plain record, which lowers to the WIT step-error');
    assert.deepEqual(calls.slice(0, 5), [
      ['log', 'info', 'summing 1 items'],
      ['log', 'warn', 'prices are made up'],
      ['progress', 'half way'],
      ['artifact', 'note.txt', 'text/plain', [104, 105]],
      ['log', 'info', 'summing 1 items'],
    ]);
    assert.throws(() => __component({}, imports), /export default step/);
  }
});
