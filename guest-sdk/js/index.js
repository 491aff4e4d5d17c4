// weft-guest: write weft code steps in JavaScript or TypeScript.
//
// One call, `step({name, description, input, output}, fn)`, turns a typed
// function into a code step: the input and output JSON Schemas come from
// zod schemas, the input is validated before `fn` runs (an error names the
// field: `input.items[2].qty: expected number, got string`), `fn`'s return
// value becomes the step's output, and `StepError` / `reject` become the
// WIT `step-error` / `reject` outcome. `weft guest build` bundles the module
// (esbuild) and turns it into a component (componentize-js); the WIT stays
// hidden. Natively (unit tests under `node --test`) `log`, `progress` and
// `artifact` print to stderr and `callJson` runs the whole step.

import { z } from 'zod';

import { FAIL, fastParser } from './fast.js';

export { z };

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];
const IS_STEP = Symbol.for('weft.step');

// The JSON Schemas `weft guest build` made in Node from the same module, by
// step name: inside the component `step` takes them from here instead of
// running zod's JSON Schema generator (whose code would then sit in every
// invocation's memory). Empty natively.
const precomputed = new Map();

// Where log lines, progress and artifacts go: stderr natively; the WIT
// host imports once `weft guest build`'s entry calls `__component`.
let host = {
  log: (level, message) => console.error(`[${level}] ${message}`),
  progress: (message) => console.error(`[progress] ${message}`),
  progressData: (message, data) => console.error(`[progress] ${message} ${data}`),
  artifact: (name, mime, data) => console.error(`[artifact] ${name} (${mime}, ${data.length} bytes)`),
};

/** A failure the step reports on purpose. */
export class StepError extends Error {
  /**
   * @param {string} code short and machine-readable (`not_found`, `too_large`...)
   * @param {string} message for a person
   * @param {{retryable?: boolean}} [options] `retryable: true` when trying again may succeed
   */
  constructor(code, message, { retryable = false } = {}) {
    super(message);
    this.name = 'StepError';
    this.code = String(code);
    this.retryable = Boolean(retryable);
  }

  /** A failure that may go away when the step is tried again. */
  static retryable(code, message) {
    return new StepError(code, message, { retryable: true });
  }

  /** The input is wrong: code `invalid_input`, not retryable. */
  static invalidInput(message) {
    return new StepError('invalid_input', message);
  }
}

/** Thrown by `reject`: the whole run is rejected with `reason`. */
export class Rejection extends Error {
  constructor(reason) {
    super(`the step rejected the run: ${reason}`);
    this.name = 'Rejection';
    this.reason = String(reason);
  }
}

/** Reject the whole run with a reason (throws; never returns). */
export function reject(reason) {
  throw new Rejection(reason);
}

/** Log a line (kept with the step's attempt): `log('x')` at info, or `log.warn('x')`. */
export const log = Object.assign((message, level = 'info') => emit(level, message), {
  trace: (message) => emit('trace', message),
  debug: (message) => emit('debug', message),
  info: (message) => emit('info', message),
  warn: (message) => emit('warn', message),
  error: (message) => emit('error', message),
});

function emit(level, message) {
  if (!LEVELS.includes(level)) throw new TypeError(`log level must be one of ${LEVELS.join(', ')}, not ${level}`);
  host.log(level, String(message));
}

/**
 * Report progress: a short status update shown for the running step, with
 * optional JSON `data` (`progress('fetched', {done: 3, of: 10})`) that the
 * run's events, MCP progress and the web view carry (over 16 KiB of JSON
 * it is left out, with a warning in the step's log).
 */
export function progress(message, data) {
  if (data === undefined) host.progress(String(message));
  else host.progressData(String(message), JSON.stringify(data) ?? 'null');
}

/** Attach a named blob to the step's attempt: `artifact('report.csv', 'text/csv', text)`. */
export function artifact(name, mime, data) {
  let bytes;
  if (typeof data === 'string') bytes = new TextEncoder().encode(data);
  else if (data instanceof Uint8Array) bytes = data;
  else if (data instanceof ArrayBuffer) bytes = new Uint8Array(data);
  else throw new TypeError(`artifact ${name}: data must be a string, a Uint8Array or an ArrayBuffer`);
  host.artifact(String(name), String(mime), bytes);
}

/** A context for tests: empty ids, attempt 1, no deadline. */
export function testContext(overrides = {}) {
  return { runId: '', step: '', attempt: 1, idempotencyKey: '', deadlineMs: Number.MAX_SAFE_INTEGER, ...overrides };
}

/**
 * Declare a code step. `input` and `output` are zod schemas; `fn(input, ctx)`
 * gets the parsed input and returns the output (synchronously).
 */
export function step(spec, fn) {
  if (spec === null || typeof spec !== 'object') throw new TypeError('step(spec, fn): spec must be an object {name, description, input, output}');
  const { name, description, version, input, output } = spec;
  if (typeof name !== 'string' || !/^[a-z0-9][a-z0-9_-]*$/.test(name)) {
    throw new TypeError(`step: name must be lower case letters, digits, '-' or '_' (such as "hello"), not ${JSON.stringify(name)}`);
  }
  if (!isSchema(input)) throw new TypeError(`step ${name}: input must be a zod schema, such as z.object({text: z.string()})`);
  if (output !== undefined && !isSchema(output)) throw new TypeError(`step ${name}: output must be a zod schema (or left out)`);
  if (typeof fn !== 'function') throw new TypeError(`step ${name}: the second argument must be the step function (input, ctx) => output`);

  const metadata = {
    name,
    description: typeof description === 'string' ? description.trim() : undefined,
    version: typeof version === 'string' ? version : undefined,
    ...(precomputed.get(name) ?? schemasOf(input, output)),
  };

  const parseInput = parser(input, (issues) => StepError.invalidInput(describeIssues('input', issues)));
  const parseOutput =
    output === undefined ? undefined : parser(output, (issues) => new StepError('invalid_output', describeIssues('output', issues)));

  /** One invocation over JSON text, as the host makes it. */
  function call(text, ctx = testContext()) {
    const trimmed = String(text).trim();
    let value = null;
    if (trimmed !== '') {
      try {
        value = JSON.parse(trimmed);
      } catch (e) {
        throw StepError.invalidInput(`input is not JSON: ${e.message}`);
      }
    }
    const data = parseInput(value);
    let out;
    try {
      out = fn(data, ctx);
    } catch (e) {
      if (e instanceof Rejection) return { tag: 'reject', val: e.reason };
      if (e instanceof StepError) throw e;
      throw new StepError('internal', `step ${name} failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (out !== null && typeof out === 'object' && typeof out.then === 'function') {
      throw new StepError('internal', `step ${name} returned a Promise: a step function must be synchronous`);
    }
    if (output !== undefined) out = parseOutput(out);
    let json;
    try {
      json = JSON.stringify(out);
    } catch (e) {
      throw new StepError('invalid_output', `output: not JSON: ${e.message}`);
    }
    return { tag: 'done', val: json === undefined ? 'null' : json };
  }

  /** Runs the step on a JSON value (tests): its output, or throws a StepError / Rejection. */
  function callJson(value, ctx = testContext()) {
    const outcome = call(JSON.stringify(value ?? null), ctx);
    if (outcome.tag === 'reject') throw new Rejection(outcome.val);
    return JSON.parse(outcome.val);
  }

  return Object.freeze({ [IS_STEP]: true, name, metadata, fn, call, callJson });
}

/** The JSON Schemas (text) of a step's input and output. */
function schemasOf(input, output) {
  return {
    inputSchema: JSON.stringify(z.toJSONSchema(input, { io: 'input' })),
    outputSchema: output === undefined ? undefined : JSON.stringify(z.toJSONSchema(output, { io: 'output' })),
  };
}

/**
 * `value` parsed by `schema`, or throws `failure(issues)`: a fast parser made
 * once answers first, and zod decides every failure (see fast.js).
 */
function parser(schema, failure) {
  const fast = fastParser(schema);
  return (value) => {
    const data = fast(value);
    if (data !== FAIL) return data;
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw failure(parsed.error.issues);
    return parsed.data;
  };
}

function isSchema(s) {
  return s !== null && typeof s === 'object' && typeof s.safeParse === 'function';
}

/** `input.items[2].qty: expected number, got string; input.name: ...`. */
export function describeIssues(root, issues) {
  return issues.map((issue) => `${pathText(root, issue.path)}: ${issueText(issue)}`).join('; ');
}

function pathText(root, path) {
  let s = root;
  for (const p of path) {
    if (typeof p === 'number') s += `[${p}]`;
    else if (typeof p === 'string' && /^[A-Za-z_$][\w$]*$/.test(p)) s += `.${p}`;
    else s += `[${JSON.stringify(String(p))}]`;
  }
  return s;
}

function issueText(issue) {
  if (issue.code === 'unrecognized_keys') return `unknown field(s): ${issue.keys.join(', ')}`;
  if (issue.code === 'invalid_type' && /received undefined$/.test(issue.message)) return `missing (expected ${issue.expected})`;
  return issue.message.replace(/^Invalid input: /, '').replace(/, received /, ', got ');
}

/** The WIT `step-error` record for anything `call` threw. */
function toStepError(e) {
  if (e instanceof StepError) return { code: e.code, message: e.message, retryable: e.retryable };
  return { code: 'internal', message: e instanceof Error ? e.message : String(e), retryable: false };
}

/**
 * The component's exports for the module's default export (used by the
 * entry `weft guest build` generates; not a public API). `imports` are the
 * WIT host functions; `defaults` fill the version and description from the
 * project's package.json.
 */
export function __component(s, imports, defaults = {}) {
  if (s === null || typeof s !== 'object' || !s[IS_STEP]) {
    throw new TypeError('the step module must `export default step({...}, fn)`');
  }
  host = imports;
  return __glue(s, defaults);
}

/**
 * Schemas made at build time, by step name (`{name: {inputSchema,
 * outputSchema}}`, or `{name: null}` to forget a name); used by the module
 * `weft guest build` generates, before the step module runs. Not a public API.
 */
export function __precomputed(entries) {
  for (const [name, schemas] of Object.entries(entries)) {
    if (schemas === null) precomputed.delete(name);
    else precomputed.set(name, schemas);
  }
}

/** Runs `f` with the host functions doing nothing (the build-time warm-up). Not a public API. */
export function __quietly(f) {
  const saved = host;
  host = { log() {}, progress() {}, progressData() {}, artifact() {} };
  try {
    return f();
  } finally {
    host = saved;
  }
}

/** The exports `describe` and `run` for a step (also for the warm-up). Not a public API. */
export function __glue(s, defaults = {}) {
  const metadata = {
    name: s.metadata.name,
    description: s.metadata.description ?? defaults.description ?? '',
    version: s.metadata.version ?? defaults.version ?? '0.0.0',
  };
  if (s.metadata.inputSchema !== undefined) metadata.inputSchema = s.metadata.inputSchema;
  if (s.metadata.outputSchema !== undefined) metadata.outputSchema = s.metadata.outputSchema;
  return {
    describe: () => metadata,
    run(ctx, input) {
      const c = {
        runId: ctx.runId,
        step: ctx.step,
        attempt: ctx.attempt,
        idempotencyKey: ctx.idempotencyKey,
        deadlineMs: Number(ctx.deadlineMs),
      };
      try {
        return { tag: 'ok', val: s.call(input, c) };
      } catch (e) {
        // A thrown value becomes the `err` of run's result: it must be a
        // plain step-error record.
        throw toStepError(e);
      }
    },
  };
}
