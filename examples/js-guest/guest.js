// A weft code step in JavaScript: turns a title into a URL slug and a
// title-cased heading. Built into a WebAssembly component for the `step`
// world (wit/step.wit) by build.mjs with componentize-js.
//
// Input:  {"text": "...", "separator": "-", "maxLength": 80}
// Output: {"slug": "...", "title": "...", "words": N}

import { log, progress } from 'weft:step/host@0.1.0';

const VERSION = '0.1.0';

const INPUT_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  title: 'SlugifyInput',
  type: 'object',
  properties: {
    text: { type: 'string', description: 'The text to turn into a slug.' },
    separator: { type: 'string', description: 'Put between words.', default: '-', maxLength: 3 },
    maxLength: { type: 'integer', description: 'Longest slug, cut at a word boundary.', minimum: 1, default: 80 },
  },
  required: ['text'],
  additionalProperties: false,
};

const OUTPUT_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  title: 'SlugifyOutput',
  type: 'object',
  properties: {
    slug: { type: 'string', description: 'Lower case ASCII words joined by the separator.' },
    title: { type: 'string', description: 'The words with their first letters in upper case.' },
    words: { type: 'integer', minimum: 0, description: 'How many words the text has.' },
  },
  required: ['slug', 'title', 'words'],
};

// Accented Latin letters and their ASCII spelling. (The engine inside the
// component is built without ICU, so String.prototype.normalize is absent.)
const FOLD = { ß: 'ss', æ: 'ae', œ: 'oe', þ: 'th' };
for (const [base, accented] of Object.entries({
  a: 'àáâãäåāăą', c: 'çćĉċč', d: 'ďđð', e: 'èéêëēĕėęě', g: 'ĝğġģ', h: 'ĥħ',
  i: 'ìíîïĩīĭįı', j: 'ĵ', k: 'ķ', l: 'ĺļľŀł', n: 'ñńņňŉ', o: 'òóôõöøōŏő',
  r: 'ŕŗř', s: 'śŝşšſ', t: 'ţťŧ', u: 'ùúûüũūŭůűų', w: 'ŵ', y: 'ýÿŷ', z: 'źżž',
})) {
  for (const c of accented) FOLD[c] = base;
}

export function describe() {
  return {
    name: 'slugify',
    description: 'Turn a title into a URL slug and a title-cased heading.',
    version: VERSION,
    inputSchema: JSON.stringify(INPUT_SCHEMA),
    outputSchema: JSON.stringify(OUTPUT_SCHEMA),
  };
}

// A thrown value becomes the `err` of run's result, so it must be a
// step-error record: an Error would not lower (it has no `code`).
class StepError {
  constructor(code, message, retryable = false) {
    this.code = code;
    this.message = message;
    this.retryable = retryable;
  }
}

function invalid(message) {
  return new StepError('invalid_input', message);
}

function asciiWord(word) {
  return [...word.toLowerCase()]
    .map((c) => FOLD[c] ?? c)
    .join('')
    .replace(/[^a-z0-9]/g, '');
}

export function run(ctx, input) {
  try {
    return { tag: 'ok', val: slugify(ctx, input) };
  } catch (e) {
    if (e instanceof StepError) throw e;
    throw new StepError('internal', `slugify failed: ${e}`);
  }
}

function slugify(ctx, input) {
  let req;
  try {
    req = JSON.parse(input);
  } catch (e) {
    throw invalid(`input is not JSON: ${e.message}`);
  }
  if (req === null || typeof req !== 'object' || Array.isArray(req)) throw invalid('input must be a JSON object');
  const unknown = Object.keys(req).filter((k) => !(k in INPUT_SCHEMA.properties));
  if (unknown.length) throw invalid(`unknown input field(s): ${unknown.join(', ')}`);
  const { text, separator = '-', maxLength = 80 } = req;
  if (typeof text !== 'string') throw invalid('"text" must be a string');
  if (typeof separator !== 'string' || separator.length > 3) throw invalid('"separator" must be a string of at most 3 characters');
  if (!Number.isInteger(maxLength) || maxLength < 1) throw invalid('"maxLength" must be a positive integer');

  log('info', `step ${ctx.step} attempt ${ctx.attempt}: ${text.length} characters`);
  const words = text.split(/[\s\-_.,;:!?/\\|()[\]{}"'`\u2013\u2014]+/u).filter((w) => w.length > 0);
  progress(`${words.length} words`);

  const title = words.map((w) => w[0].toUpperCase() + w.slice(1)).join(' ');
  let slug = '';
  for (const w of words.map(asciiWord).filter((w) => w.length > 0)) {
    const next = slug ? slug + separator + w : w;
    if (next.length > maxLength) {
      if (!slug) slug = w.slice(0, maxLength);
      log('info', `slug cut at ${maxLength} characters`);
      break;
    }
    slug = next;
  }
  if (!slug) log('warn', 'the text has no letters or digits: empty slug');

  return { tag: 'done', val: JSON.stringify({ slug, title, words: words.length }) };
}
