// Modules kept as text (lazy.js): their stand-ins behave as the real exports
// once the text is evaluated, the text is evaluated on first use only, and
// the modules it shares with the bundle are the bundle's own.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { lazyModule } from '../lazy.js';

// What esbuild makes of a module kept as text: CommonJS that asks for the
// modules it shares with the bundle by key. This one counts its evaluations
// in the shared module, so the test sees when (and that) it ran.
const TEXT = `
const shared = require('#0');
shared.evaluations += 1;
class Failure extends Error {
  constructor(message) { super(message); this.name = 'Failure'; }
  static of(m) { return new Failure(m); }
}
function twice(x) { return this?.prefix ? this.prefix + x + x : x + x; }
module.exports = { Failure, twice, table: { a: 1, nested: { b: 2 } }, registry: shared.registry };
`;

function kept() {
  const shared = { evaluations: 0, registry: new Map() };
  const m = lazyModule(TEXT, { '#0': shared });
  return { shared, Failure: m.fn('Failure'), twice: m.fn('twice'), table: m.obj('table'), registry: m.obj('registry') };
}

test('nothing is evaluated until an export is used, and then once', () => {
  const { shared, twice, table } = kept();
  assert.equal(typeof twice, 'function');
  assert.equal(typeof table, 'object');
  assert.equal(shared.evaluations, 0);
  assert.equal(twice('ab'), 'abab');
  assert.equal(table.a, 1);
  assert.equal(shared.evaluations, 1);
});

test('a function stand-in calls the real one with its `this`, and reads its properties', () => {
  const { twice } = kept();
  assert.equal(twice.call({ prefix: '>' }, 'x'), '>xx');
  assert.equal(twice.name, 'twice');
  assert.equal(twice.length, 1);
});

test('a class stand-in makes real instances, subclasses, and answers instanceof', () => {
  const { Failure } = kept();
  const e = new Failure('boom');
  assert.equal(e.message, 'boom');
  assert.equal(e.name, 'Failure');
  assert.ok(e instanceof Failure);
  assert.ok(e instanceof Error);
  assert.equal(Object.getPrototypeOf(e), Failure.prototype);
  assert.ok(Failure.of('x') instanceof Failure);
  class Sub extends Failure {}
  const s = new Sub('y');
  assert.ok(s instanceof Sub && s instanceof Failure);
  assert.equal(Object.getPrototypeOf(Sub), Failure);
  assert.ok(!({} instanceof Failure));
});

test('an object stand-in reads, lists, writes and deletes through to the real object', () => {
  const { table } = kept();
  assert.deepEqual(Object.keys(table), ['a', 'nested']);
  assert.deepEqual({ ...table }, { a: 1, nested: { b: 2 } });
  assert.ok('nested' in table && !('zzz' in table));
  table.c = 3;
  assert.equal(table.c, 3);
  delete table.a;
  assert.deepEqual(Object.keys(table), ['nested', 'c']);
  assert.equal(JSON.stringify(table), '{"nested":{"b":2},"c":3}');
});

test('the text shares the bundle’s modules: state written through one side is seen on the other', () => {
  const { shared, registry } = kept();
  shared.registry.set('k', 'v');
  assert.equal(registry.get.call(shared.registry, 'k'), 'v');
  assert.equal(Reflect.getPrototypeOf(registry), Map.prototype);
});

test('a module that asks for one it was not handed says which', () => {
  const m = lazyModule(`require('#7')`, {});
  assert.throws(() => m.fn('x')(), /needs #7/);
});
