// Modules a component keeps as text until first use (see lazy-build.mjs,
// which decides which and writes the module that calls `lazyModule`).
//
// Every invocation of a component starts from the snapshot taken after the
// step module ran, and each call pays for the snapshot's code, even code it
// never runs: the pages that hold it are read on every call. Most of zod is
// code a step never runs inside its component (the messages in 40-odd
// languages, the JSON Schema generator and reader, the schema compiler), so
// those modules are kept as source text, which costs nothing until it is
// read. Their exports stand in as proxies: the first use of any of them
// evaluates the module's text (once per invocation) and hands the use on,
// so a step that does use them gets exactly zod's behaviour, later.

/**
 * A module kept as text: `text` is its bundle in CommonJS form, `deps` the
 * modules it shares with the component's bundle, by the key its `require`
 * asks for. Returns stand-ins for its exports: `fn(name)` for a function or
 * class, `obj(name)` for an object.
 */
export function lazyModule(text, deps) {
  let exports;
  const load = () => {
    if (exports === undefined) {
      const module = { exports: {} };
      const require = (key) => {
        if (!Object.hasOwn(deps, key)) throw new Error(`weft-guest: a module kept as text needs ${key}, which the bundle did not hand over`);
        return deps[key];
      };
      new Function('require', 'module', 'exports', text)(require, module, module.exports);
      exports = module.exports;
    }
    return exports;
  };
  const make = (target, name) => {
    const stand = new Proxy(target, TRAPS);
    STANDS.set(target, { load, name, stand });
    return stand;
  };
  return {
    fn: (name) => make(function () {}, name),
    obj: (name) => make({}, name),
  };
}

// One set of traps for all stand-ins (each a proxy of its own target), so a
// stand-in costs two small objects: `STANDS` says what each target stands for.
const STANDS = new WeakMap();

/** The real value a stand-in's target stands for. */
function real(target) {
  const { load, name } = STANDS.get(target);
  return load()[name];
}

/** Traps that hand every use on to the real value. */
const TRAPS = {
  apply: (target, self, args) => Reflect.apply(real(target), self, args),
  // `new Stand()` makes an instance of the real class.
  construct: (target, args, newTarget) =>
    Reflect.construct(real(target), args, newTarget === STANDS.get(target).stand ? real(target) : newTarget),
  get: (target, key) => {
    const r = real(target);
    return Reflect.get(r, key, r);
  },
  set: (target, key, value) => Reflect.set(real(target), key, value),
  has: (target, key) => Reflect.has(real(target), key),
  deleteProperty: (target, key) => Reflect.deleteProperty(real(target), key),
  getPrototypeOf: (target) => Reflect.getPrototypeOf(real(target)),
  ownKeys: (target) => {
    // A proxy must list its target's own keys that cannot be removed (a
    // function's `prototype`), whatever the real value has.
    const keys = new Set(Reflect.ownKeys(real(target)));
    for (const k of Reflect.ownKeys(target)) if (!Reflect.getOwnPropertyDescriptor(target, k).configurable) keys.add(k);
    return [...keys];
  },
  getOwnPropertyDescriptor: (target, key) => {
    const d = Reflect.getOwnPropertyDescriptor(real(target), key);
    const t = Reflect.getOwnPropertyDescriptor(target, key);
    if (t !== undefined && !t.configurable) {
      return d === undefined || !('value' in d) ? t : { value: d.value, writable: true, enumerable: t.enumerable, configurable: false };
    }
    return d === undefined ? undefined : { ...d, configurable: true };
  },
  defineProperty: (target, key, d) => Reflect.defineProperty(real(target), key, d),
};
