// Fast parsers for the common zod schemas, for the one engine a step runs on
// inside its component: an interpreter without a JIT, where zod's generic
// parsing cost as much as the step itself (~0.9 M fuel per parse of a
// three-field object, against ~0.1 M for the checks a person writes by hand).
//
// `fastParser(schema)` walks the schema once (at import time, which the
// component's build snapshots) and returns `parse(value)`: the parsed value,
// exactly what `schema.parse(value)` returns, or `FAIL`. It never decides a
// failure: on `FAIL` the caller asks zod itself, which gives the issues (and
// the value, in the unlikely case the fast path was only unsure). A kind of
// schema or check this module does not know is handed to zod's own parse for
// that part of the value, so a fast parser is never wrong, only slower.
// Known: string (length checks), number (bounds, integers), boolean, null,
// unknown/any, literal, enum, array (length checks), object (strip, strict,
// loose), optional, nullable, default and union. `test/fast.test.js` checks
// fast and zod against each other on many values.

/** What a fast parser returns when the value may not fit (ask zod). */
export const FAIL = Symbol('weft.fast.fail');

const plainProto = Object.prototype;

/** `parse(value)` → the parsed value or `FAIL`, for a zod schema. */
export function fastParser(schema) {
  return compile(schema, new Map());
}

function compile(schema, seen) {
  const known = seen.get(schema);
  if (known !== undefined) return known.fn ?? ((v) => known.fn(v));
  const slot = { fn: undefined };
  seen.set(schema, slot);
  let fn;
  try {
    fn = build(schema, seen);
  } catch {
    fn = undefined;
  }
  slot.fn = fn ?? viaZod(schema);
  return slot.fn;
}

/** zod's own parse of this part of the value. */
function viaZod(schema) {
  return (v) => {
    const r = schema.safeParse(v);
    return r.success ? r.data : FAIL;
  };
}

/** True when `def` has no keys besides `allowed`. */
function only(def, allowed) {
  for (const k of Object.keys(def)) if (!allowed.includes(k)) return false;
  return true;
}

/** A fast parser for the node, or undefined to hand it to zod. */
function build(schema, seen) {
  const def = schema?._zod?.def;
  if (def === undefined) return undefined;
  switch (def.type) {
    case 'unknown':
    case 'any':
      return only(def, ['type']) ? (v) => v : undefined;
    case 'boolean':
      return only(def, ['type']) ? (v) => (typeof v === 'boolean' ? v : FAIL) : undefined;
    case 'null':
      return only(def, ['type']) ? (v) => (v === null ? v : FAIL) : undefined;
    case 'string':
      return stringParser(def);
    case 'number':
      return numberParser(def);
    case 'literal':
      return literalParser(def);
    case 'enum':
      return enumParser(def);
    case 'array':
      return arrayParser(def, seen);
    case 'object':
      return objectParser(def, seen);
    case 'optional': {
      if (!only(def, ['type', 'innerType']) || schema._zod.traits?.has('$ZodExactOptional')) return undefined;
      const inner = compile(def.innerType, seen);
      // zod hands undefined on only to an inner schema that substitutes a
      // value (a default), and takes undefined when that fails.
      const defaulted = def.innerType._zod.optin === 'defaulted';
      return (v) => {
        if (v !== undefined) return inner(v);
        if (!defaulted) return undefined;
        const r = inner(v);
        return r === FAIL ? undefined : r;
      };
    }
    case 'nullable': {
      if (!only(def, ['type', 'innerType'])) return undefined;
      const inner = compile(def.innerType, seen);
      return (v) => (v === null ? null : inner(v));
    }
    case 'default': {
      // zod returns the default as it is, without parsing it.
      if (!only(def, ['type', 'innerType', 'defaultValue'])) return undefined;
      const inner = compile(def.innerType, seen);
      // The getter each time, as zod: a default may be a function
      // (\`.default(() => Date.now())\`) or an object zod clones.
      return (v) => {
        if (v === undefined) return def.defaultValue;
        const r = inner(v);
        return r === undefined ? def.defaultValue : r;
      };
    }
    case 'union': {
      if (!only(def, ['type', 'options'])) return undefined;
      const options = def.options.map((o) => compile(o, seen));
      return (v) => {
        for (const o of options) {
          const r = o(v);
          if (r !== FAIL) return r;
        }
        return FAIL;
      };
    }
    default:
      return undefined;
  }
}

/** The length bounds of `checks`, or undefined when one is of another kind. */
function lengthBounds(checks) {
  let min = 0;
  let max = Infinity;
  for (const c of checks ?? []) {
    const d = c._zod.def;
    if (d.check === 'min_length' && only(d, ['check', 'minimum'])) min = Math.max(min, d.minimum);
    else if (d.check === 'max_length' && only(d, ['check', 'maximum'])) max = Math.min(max, d.maximum);
    else if (d.check === 'length_equals' && only(d, ['check', 'length'])) {
      min = Math.max(min, d.length);
      max = Math.min(max, d.length);
    } else return undefined;
  }
  return { min, max };
}

function stringParser(def) {
  if (!only(def, ['type', 'checks'])) return undefined;
  const b = lengthBounds(def.checks);
  if (b === undefined) return undefined;
  const { min, max } = b;
  if (min === 0 && max === Infinity) return (v) => (typeof v === 'string' ? v : FAIL);
  return (v) => (typeof v === 'string' && v.length >= min && v.length <= max ? v : FAIL);
}

function numberParser(def) {
  let int = false;
  if (def.check !== undefined || def.format !== undefined) {
    // z.int(): the integer format is the schema's own check.
    if (!(def.check === 'number_format' && def.format === 'safeint')) return undefined;
    if (!only(def, ['type', 'checks', 'check', 'format', 'abort'])) return undefined;
    int = true;
  } else if (!only(def, ['type', 'checks'])) return undefined;
  let lo = -Infinity;
  let loIn = true;
  let hi = Infinity;
  let hiIn = true;
  for (const c of def.checks ?? []) {
    const d = c._zod.def;
    if (d.check === 'number_format' && d.format === 'safeint' && only(d, ['type', 'check', 'abort', 'format'])) int = true;
    else if (d.check === 'greater_than' && only(d, ['check', 'value', 'inclusive'])) {
      if (d.value > lo || (d.value === lo && !d.inclusive)) [lo, loIn] = [d.value, d.inclusive];
    } else if (d.check === 'less_than' && only(d, ['check', 'value', 'inclusive'])) {
      if (d.value < hi || (d.value === hi && !d.inclusive)) [hi, hiIn] = [d.value, d.inclusive];
    } else return undefined;
  }
  return (v) => {
    if (typeof v !== 'number' || !Number.isFinite(v)) return FAIL;
    if (int && !Number.isSafeInteger(v)) return FAIL;
    if (v < lo || (v === lo && !loIn) || v > hi || (v === hi && !hiIn)) return FAIL;
    return v;
  };
}

function literalParser(def) {
  if (!only(def, ['type', 'values'])) return undefined;
  const values = [...def.values];
  if (!values.every((x) => x === null || ['string', 'boolean'].includes(typeof x) || Number.isFinite(x))) return undefined;
  return (v) => (values.includes(v) ? v : FAIL);
}

function enumParser(def) {
  if (!only(def, ['type', 'entries'])) return undefined;
  const values = Object.values(def.entries);
  if (!values.every((x) => typeof x === 'string')) return undefined;
  return (v) => (typeof v === 'string' && values.includes(v) ? v : FAIL);
}

function arrayParser(def, seen) {
  if (!only(def, ['type', 'element', 'checks'])) return undefined;
  const b = lengthBounds(def.checks);
  if (b === undefined) return undefined;
  const { min, max } = b;
  const element = compile(def.element, seen);
  return (v) => {
    if (!Array.isArray(v) || v.length < min || v.length > max) return FAIL;
    const out = new Array(v.length);
    for (let i = 0; i < v.length; i++) {
      const r = element(v[i]);
      if (r === FAIL) return FAIL;
      out[i] = r;
    }
    return out;
  };
}

function objectParser(def, seen) {
  if (!only(def, ['type', 'shape', 'catchall']) || (def.checks ?? []).length > 0) return undefined;
  const rest = def.catchall === undefined ? 'strip' : def.catchall._zod.def.type;
  if (rest !== 'strip' && rest !== 'never' && rest !== 'unknown') return undefined;
  if (rest === 'unknown' && !only(def.catchall._zod.def, ['type'])) return undefined;
  const keys = Object.keys(def.shape);
  // zod reads `key in value`: a key Object.prototype has (`toString`,
  // `__proto__`) would read differently here.
  if (keys.some((k) => k in plainProto)) return undefined;
  const declared = new Set(keys);
  const parsers = keys.map((k) => compile(def.shape[k], seen));
  // How zod treats an absent key: `optin` says whether it may be absent
  // ('optional', or 'defaulted' when a value is put in its place), `optout`
  // whether the output may lack it.
  const optin = keys.map((k) => def.shape[k]._zod.optin);
  const optout = keys.map((k) => def.shape[k]._zod.optout === 'optional');
  const n = keys.length;
  return (v) => {
    if (typeof v !== 'object' || v === null) return FAIL;
    const proto = Object.getPrototypeOf(v);
    if (proto !== plainProto && proto !== null) return FAIL;
    const out = {};
    for (let i = 0; i < n; i++) {
      const k = keys[i];
      const present = Object.hasOwn(v, k);
      if (present) {
        const r = parsers[i](v[k]);
        if (r === FAIL) return FAIL;
        out[k] = r;
        continue;
      }
      if (optin[i] === undefined) return FAIL;
      if (optout[i] && optin[i] === 'optional') continue;
      const r = parsers[i](undefined);
      if (r === FAIL) {
        if (optout[i]) continue;
        return FAIL;
      }
      if (r !== undefined) out[k] = r;
      else if (optin[i] === 'defaulted' && !optout[i]) out[k] = undefined;
    }
    if (rest !== 'strip') {
      const all = Object.keys(v);
      for (let j = 0; j < all.length; j++) {
        const k = all[j];
        if (declared.has(k)) continue;
        if (rest === 'never' || k === '__proto__') return FAIL;
        out[k] = v[k];
      }
    }
    return out;
  };
}
