// Types of weft-guest (index.js): write weft code steps in TypeScript.
import { z } from 'zod';

export { z };

/** Who is running the step and until when. */
export interface Context {
  /** The run this invocation belongs to (`r_...`); empty outside a run. */
  runId: string;
  /** The step's name in the workflow definition. */
  step: string;
  /** Attempt number, from 1. */
  attempt: number;
  /** `<run_id>/<step>[/<item>]/<attempt>`: stable across crashes; use it to make a side effect happen once. */
  idempotencyKey: string;
  /** Wall-clock deadline of this attempt, milliseconds since the Unix epoch. */
  deadlineMs: number;
}

/** What a step declares: its name, what it does, and its input and output schemas. */
export interface StepSpec<I extends z.ZodType, O extends z.ZodType | undefined> {
  /** Lower case letters, digits, `-` or `_`, such as `hello`. */
  name: string;
  /** What the step does, for a person or an LLM (default: package.json's description). */
  description?: string;
  /** The step's version (default: package.json's version). */
  version?: string;
  /** The input's schema: parsed and validated before the function runs. */
  input: I;
  /** The output's schema: checked after the function returns (optional). */
  output?: O;
}

/** What one invocation produced: the output as JSON text, or a rejection of the run. */
export type Outcome = { tag: 'done'; val: string } | { tag: 'reject'; val: string };

type Output<O> = O extends z.ZodType ? z.input<O> : unknown;
type Parsed<O> = O extends z.ZodType ? z.output<O> : unknown;

/** A declared step: export it as the module's default export. */
export interface Step<I extends z.ZodType, O extends z.ZodType | undefined> {
  readonly name: string;
  readonly metadata: {
    name: string;
    description?: string;
    version?: string;
    inputSchema?: string;
    outputSchema?: string;
  };
  /** The typed function itself. */
  readonly fn: (input: z.output<I>, ctx: Context) => Output<O>;
  /** One invocation over JSON text, as the host makes it (throws a StepError on failure). */
  call(input: string, ctx?: Context): Outcome;
  /** Runs the whole step on a JSON value (tests): the output, or throws a StepError or a Rejection. */
  callJson(input: unknown, ctx?: Context): Parsed<O>;
}

/**
 * Declare a code step: `export default step({name, description, input, output}, (input, ctx) => ...)`.
 * The function must be synchronous.
 */
export function step<I extends z.ZodType, O extends z.ZodType | undefined = undefined>(
  spec: StepSpec<I, O>,
  fn: (input: z.output<I>, ctx: Context) => Output<O>,
): Step<I, O>;

/** A failure the step reports on purpose. */
export class StepError extends Error {
  constructor(code: string, message: string, options?: { retryable?: boolean });
  /** Short and machine-readable, such as `invalid_input`. */
  readonly code: string;
  /** True when trying again may succeed. */
  readonly retryable: boolean;
  /** A failure that may go away when the step is tried again. */
  static retryable(code: string, message: string): StepError;
  /** The input is wrong: code `invalid_input`, not retryable. */
  static invalidInput(message: string): StepError;
}

/** Thrown by `reject`: the whole run is rejected. */
export class Rejection extends Error {
  constructor(reason: string);
  readonly reason: string;
}

/** Reject the whole run with a reason (throws). */
export function reject(reason: string): never;

export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';

/** Log a line kept with the step's attempt: `log('x')` at info, `log.warn('x')`... */
export const log: ((message: unknown, level?: Level) => void) & {
  trace(message: unknown): void;
  debug(message: unknown): void;
  info(message: unknown): void;
  warn(message: unknown): void;
  error(message: unknown): void;
};

/**
 * Report progress: a short status update shown for the running step, with
 * optional JSON `data` (`progress('fetched', {done: 3, of: 10})`).
 */
export function progress(message: string, data?: unknown): void;

/** Attach a named blob to the step's attempt, such as `artifact('report.csv', 'text/csv', text)`. */
export function artifact(name: string, mime: string, data: string | Uint8Array | ArrayBuffer): void;

/** A context for tests: empty ids, attempt 1, no deadline. */
export function testContext(overrides?: Partial<Context>): Context;

/** `input.items[2].qty: expected number, got string; ...` from zod issues. */
export function describeIssues(
  root: string,
  issues: readonly { code: string; path: readonly PropertyKey[]; message: string; expected?: string; keys?: string[] }[],
): string;
