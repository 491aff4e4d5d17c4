// The greet step of `weft guest new --lang js`, written by hand against the
// `step` world (wit/step.wit) with no SDK: its JSON Schemas, input checks
// and WIT result shapes spelled out, as docs/guests.md "Without an SDK"
// describes. host/tests/e2e/guest_sdk.rs builds it with the pinned
// componentize-js and compares what one call costs with the SDK-built step.

import { log } from 'weft:step/host@0.1.0';

const INPUT_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, description: 'Who to greet' },
    times: { type: 'integer', minimum: 1, maximum: 10, default: 1, description: 'How many greetings' },
  },
  required: ['name'],
};

const OUTPUT_SCHEMA = {
  type: 'object',
  properties: { greeting: { type: 'string', description: 'The greeting' } },
  required: ['greeting'],
};

export function describe() {
  return {
    name: 'greet',
    description: 'Greet someone by name.',
    version: '0.1.0',
    inputSchema: JSON.stringify(INPUT_SCHEMA),
    outputSchema: JSON.stringify(OUTPUT_SCHEMA),
  };
}

// A thrown value becomes the `err` of run's result: a step-error record.
const invalid = (message) => ({ code: 'invalid_input', message, retryable: false });

export function run(ctx, input) {
  let args;
  try {
    args = JSON.parse(input);
  } catch (e) {
    throw invalid(`the input is not JSON: ${e.message}`);
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args)) throw invalid('input: expected an object');
  const { name, times = 1 } = args;
  if (typeof name !== 'string' || name.length < 1) throw invalid('input.name: expected a string of at least 1 character');
  if (!Number.isInteger(times) || times < 1 || times > 10) throw invalid('input.times: expected an integer from 1 to 10');
  log('info', `attempt ${ctx.attempt} greets ${name}`);
  const greeting = Array(times).fill(`Hello, ${name}!`).join(' ');
  return { tag: 'ok', val: { tag: 'done', val: JSON.stringify({ greeting }) } };
}
