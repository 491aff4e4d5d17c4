// A weft code step in JavaScript on the weft-guest SDK: turns a title into
// a URL slug and a title-cased heading. `weft guest build` makes the
// component build/slugify.wasm; `npm test` runs guest.test.js natively.

import { log, progress, step, z } from 'weft-guest';

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

const asciiWord = (word) =>
  [...word.toLowerCase()]
    .map((c) => FOLD[c] ?? c)
    .join('')
    .replace(/[^a-z0-9]/g, '');

export default step(
  {
    name: 'slugify',
    description: 'Turn a title into a URL slug and a title-cased heading.',
    input: z.strictObject({
      text: z.string().describe('The text to turn into a slug.'),
      separator: z.string().max(3).default('-').describe('Put between words.'),
      maxLength: z.number().int().min(1).default(80).describe('Longest slug, cut at a word boundary.'),
    }),
    output: z.object({
      slug: z.string().describe('Lower case ASCII words joined by the separator.'),
      title: z.string().describe('The words with their first letters in upper case.'),
      words: z.number().int().min(0).describe('How many words the text has.'),
    }),
  },
  ({ text, separator, maxLength }, ctx) => {
    log(`step ${ctx.step} attempt ${ctx.attempt}: ${text.length} characters`);
    const words = text.split(/[\s\-_.,;:!?/\\|()[\]{}"'`\u2013\u2014]+/u).filter((w) => w.length > 0);
    progress(`${words.length} words`);

    const title = words.map((w) => w[0].toUpperCase() + w.slice(1)).join(' ');
    let slug = '';
    for (const w of words.map(asciiWord).filter((w) => w.length > 0)) {
      const next = slug ? slug + separator + w : w;
      if (next.length > maxLength) {
        if (!slug) slug = w.slice(0, maxLength);
        log(`slug cut at ${maxLength} characters`);
        break;
      }
      slug = next;
    }
    if (!slug) log.warn('the text has no letters or digits: empty slug');
    return { slug, title, words: words.length };
  },
);
