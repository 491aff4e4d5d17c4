// Imported first by the entry `weft guest build` generates, before the
// step module: every invocation of a component starts from the build-time
// snapshot, so zod's compiled object parsers (made with `new Function` on
// first use) would be rebuilt on every call. zod decides when a schema is
// made, hence this module runs before the step's schemas exist.
import { z } from 'zod';

z.config({ jitless: true });

export { __component } from './index.js';
