// The step natively, through its JSON interface: `npm test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StepError } from 'weft-guest';

import slugify from './guest.js';

test('slugs fold accents and keep the words', () => {
  assert.deepEqual(slugify.callJson({ text: 'Héllo, Wörld! Straße — café' }), {
    slug: 'hello-world-strasse-cafe',
    title: 'Héllo Wörld Straße Café',
    words: 4,
  });
});

test('a long title is cut at a word boundary', () => {
  assert.deepEqual(slugify.callJson({ text: 'a very long title indeed', separator: '_', maxLength: 10 }), {
    slug: 'a_very',
    title: 'A Very Long Title Indeed',
    words: 5,
  });
});

test('a wrong input names the field', () => {
  const wrong = (input, message) =>
    assert.throws(() => slugify.callJson(input), (e) => e instanceof StepError && e.code === 'invalid_input' && e.message === message);
  wrong({ text: 5 }, 'input.text: expected string, got number');
  wrong({ text: 'x', sep: '_' }, 'input: unknown field(s): sep');
  wrong({ text: 'x', separator: '----' }, 'input.separator: Too big: expected string to have <=3 characters');
});
