// Imported first by the entry `weft guest build` generates, before the
// step module: every invocation of a component starts from the build-time
// snapshot, so zod's compiled object parsers (made with `new Function` on
// first use) would be rebuilt on every call. zod decides when a schema is
// made, hence this module runs before the step's schemas exist. The
// generated entry then hands over the schemas made at build time
// (`__precomputed`) and, once the step module ran, wires it to the host
// (`__component`), which also warms the snapshot up (warm.js).
import { z } from 'zod';

import { __component as glue } from './index.js';
import { warmUp } from './warm.js';

z.config({ jitless: true });

export { __precomputed } from './index.js';

export function __component(s, imports, defaults) {
  const exports = glue(s, imports, defaults);
  warmUp(imports);
  return exports;
}
