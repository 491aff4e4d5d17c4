// The fast parsers against zod itself: on every value, a fast parser either
// says FAIL or returns exactly what zod returns (same value, same key
// order); and on the schemas it knows it accepts everything zod accepts
// (else it would be no faster).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { z } from '../index.js';
import { FAIL, fastParser } from '../fast.js';

// A deterministic pseudo-random source (mulberry32).
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = ['a', 'b', 'text', 'qty', 'items', 'sku', 'currency', 'x y', 'extra'];
const STRINGS = ['', 'a', 'ab', 'abc', 'abcd', 'EUR', 'USD', 'GBP', 'Hello World', 'x'];
const NUMBERS = [0, -0, 1, -1, 2, 2.5, 3, 5, 79, 80, 81, 1e300, -7, 0.1, 2 ** 53, 10];

function randomValue(r, depth = 0) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const k = Math.floor(r() * (depth > 2 ? 5 : 7));
  switch (k) {
    case 0: return null;
    case 1: return r() < 0.5;
    case 2: return pick(NUMBERS);
    case 3: return pick(STRINGS);
    case 4: return undefined;
    case 5: return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth + 1));
    default: {
      const o = {};
      for (let i = Math.floor(r() * 4); i > 0; i--) o[pick(KEYS)] = randomValue(r, depth + 1);
      return o;
    }
  }
}

/** Values near a valid one: each field dropped, replaced or joined by another. */
function mutations(r, valid, count) {
  const out = [valid];
  for (let i = 0; i < count; i++) {
    const v = structuredClone(valid);
    const target = pickObject(r, v);
    if (target !== undefined) {
      const keys = Object.keys(target);
      const m = r();
      if (m < 0.3 && keys.length) delete target[keys[Math.floor(r() * keys.length)]];
      else if (m < 0.7 && keys.length) target[keys[Math.floor(r() * keys.length)]] = randomValue(r, 2);
      else target[KEYS[Math.floor(r() * KEYS.length)]] = randomValue(r, 2);
    }
    out.push(v);
  }
  return out;
}

function pickObject(r, v) {
  if (v === null || typeof v !== 'object') return undefined;
  const inner = Object.values(v).filter((x) => x !== null && typeof x === 'object');
  if (inner.length && r() < 0.5) return pickObject(r, inner[Math.floor(r() * inner.length)]) ?? v;
  return v;
}

const Item = z.object({ sku: z.string(), qty: z.number().int().min(0) });
const CASES = [
  ['slugify input', z.strictObject({
    text: z.string(),
    separator: z.string().max(3).default('-'),
    maxLength: z.number().int().min(1).default(80),
  }), { text: 'Hello World', separator: '_', maxLength: 10 }],
  ['order input', z.object({ items: z.array(Item).min(1), currency: z.enum(['EUR', 'USD']).default('EUR') }),
    { items: [{ sku: 'a', qty: 2 }, { sku: 'b', qty: 0 }], currency: 'USD' }],
  ['loose, optional, nullable', z.looseObject({
    a: z.string().optional(),
    b: z.number().gt(2).lt(80).nullable(),
    qty: z.int().max(10).optional().default(3),
  }), { a: 'x', b: 5, extra: [1] }],
  ['union and literals', z.object({
    x: z.union([z.string().length(2), z.number(), z.null()]),
    items: z.array(z.literal(['a', 3, true])).max(2),
    text: z.boolean(),
  }).partial(), { x: 'ab', items: ['a', 3], text: false }],
  ['unknown and any', z.object({ a: z.unknown(), b: z.any() }), { a: { deep: [1] }, b: 2 }],
  ['nested arrays', z.array(z.array(z.number().min(-1)).min(1)), [[1, 2], [0]]],
];

for (const [name, schema, valid] of CASES) {
  test(`fast and zod agree: ${name}`, () => {
    const fast = fastParser(schema);
    const r = rng(name.length * 7919);
    const values = [...mutations(r, valid, 400), ...Array.from({ length: 400 }, () => randomValue(r))];
    let accepted = 0;
    for (const v of values) {
      const want = schema.safeParse(v);
      const got = fast(structuredClone(v));
      if (want.success) {
        assert.notEqual(got, FAIL, `fast refused what zod accepts: ${JSON.stringify(v)}`);
        assert.deepStrictEqual(got, want.data);
        assert.equal(JSON.stringify(got), JSON.stringify(want.data));
        accepted++;
      } else {
        assert.equal(got, FAIL, `fast accepted what zod refuses: ${JSON.stringify(v)}`);
      }
    }
    // Both answers occur: the values exercise acceptance and refusal.
    assert.ok(accepted > 5 && accepted < values.length - 5, `${name}: ${accepted} of ${values.length} accepted`);
  });
}

test('a schema or check the fast parser does not know goes to zod for that part', () => {
  const schema = z.object({
    n: z.number().multipleOf(2),
    t: z.string().transform((s) => s.toUpperCase()),
    e: z.email(),
    o: z.object({ a: z.string() }).refine((o) => o.a !== 'no', 'not no'),
  });
  const fast = fastParser(schema);
  const v = { n: 4, t: 'abc', e: 'a@b.io', o: { a: 'yes' } };
  assert.deepStrictEqual(fast(v), { n: 4, t: 'ABC', e: 'a@b.io', o: { a: 'yes' } });
  assert.equal(fast({ ...v, n: 3 }), FAIL);
  assert.equal(fast({ ...v, e: 'nope' }), FAIL);
  assert.equal(fast({ ...v, o: { a: 'no' } }), FAIL);
});

test('recursive schemas', () => {
  const Tree = z.object({
    name: z.string(),
    get children() {
      return z.array(Tree);
    },
  });
  const fast = fastParser(Tree);
  const t = { name: 'a', children: [{ name: 'b', children: [] }] };
  assert.deepStrictEqual(fast(t), Tree.parse(t));
  assert.equal(fast({ name: 'a', children: [{ name: 1, children: [] }] }), FAIL);
});

test('a key Object.prototype has is read as zod reads it', () => {
  const schema = z.object({ toString: z.string().optional() });
  const fast = fastParser(schema);
  for (const v of [{}, { toString: 'x' }, { toString: 1 }]) {
    const want = schema.safeParse(v);
    const got = fast(v);
    if (want.success) assert.deepStrictEqual(got, want.data);
    else assert.equal(got, FAIL);
  }
});

test('a default made by a function is made again for each value, as zod does', () => {
  let n = 0;
  const schema = z.object({ id: z.number().default(() => ++n), tags: z.array(z.string()).default([]) });
  const fast = fastParser(schema);
  const a = fast({});
  const b = fast({});
  assert.deepStrictEqual([a.id, b.id], [1, 2]);
  assert.notEqual(a.tags, b.tags, 'an object default is a fresh copy each time');
});
