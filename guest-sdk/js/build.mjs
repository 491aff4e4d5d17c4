// Builds a JavaScript or TypeScript step into a component of the `step`
// world: esbuild bundles the project's step module (package.json `main`)
// with an entry that exports `describe` and `run`, and componentize-js
// turns the bundle into a component. Before that the step module runs once
// in Node, to make its JSON Schemas at build time. `weft guest build` runs it:
//
//   node build.mjs --project DIR --toolchain DIR --wit DIR --out FILE
//
// `--toolchain` is a folder where the pinned toolchain (toolchain/package.json)
// is installed. Progress goes to stderr.
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

import { bundle } from './lazy-build.mjs';

const HOST = 'weft:step/host@0.1.0';

const { values: args } = parseArgs({
  options: {
    project: { type: 'string' },
    toolchain: { type: 'string' },
    wit: { type: 'string' },
    out: { type: 'string' },
  },
});
for (const flag of ['project', 'toolchain', 'wit', 'out']) {
  if (!args[flag]) fail(`--${flag} is required`);
}

function fail(message) {
  console.error(`weft guest build: ${message}`);
  process.exit(2);
}

const project = resolve(args.project);
const pkg = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8'));
const main = pkg.main;
if (typeof main !== 'string' || !existsSync(join(project, main))) {
  fail(`package.json's "main" must name the step module (such as "src/step.ts"), found ${JSON.stringify(main)}`);
}
if (!existsSync(join(project, 'node_modules/weft-guest/package.json'))) {
  fail(`weft-guest is not installed in ${project}/node_modules: run \`npm install\` there`);
}

const toolchain = resolve(args.toolchain);
const require = createRequire(join(toolchain, 'package.json'));
const esbuild = require('esbuild');
const out = resolve(args.out);
const work = join(dirname(out), '.weft');
mkdirSync(work, { recursive: true });
const stepModule = JSON.stringify('./' + main.replace(/^\.\//, ''));

const schemas = await schemasInNode();

// The entry: the schemas made above, then the step module's default export,
// wired to the WIT host imports, exported as the world's `describe` and `run`.
// Imports run in order: weft-guest/component, the schemas, the step module.
const defaults = { version: pkg.version, description: pkg.description };
const entry = `
import { log, progress, progressData, artifact } from ${JSON.stringify(HOST)};
import { __component } from 'weft-guest/component';
import 'weft:schemas';
import step from ${stepModule};
const glue = __component(step, { log, progress, progressData, artifact }, ${JSON.stringify(defaults)});
export const describe = glue.describe;
export const run = glue.run;
`;
const schemasModule = {
  name: 'weft-schemas',
  setup(b) {
    b.onResolve({ filter: /^weft:schemas$/ }, () => ({ path: 'schemas', namespace: 'weft' }));
    b.onLoad({ filter: /.*/, namespace: 'weft' }, () => ({
      contents: `import { __precomputed } from 'weft-guest/component';\n__precomputed(${JSON.stringify(schemas)});\n`,
      resolveDir: project,
      loader: 'js',
    }));
  },
};

/**
 * The step's JSON Schemas, made by running its module in Node (bundled by
 * esbuild, so TypeScript works too): the component then holds the text
 * instead of running zod's generator in its snapshot. `{}` when the module
 * does not run in Node; the component makes them itself then.
 */
async function schemasInNode() {
  const file = join(work, `${pkg.name ?? 'step'}.${process.pid}.schemas.mjs`);
  try {
    await esbuild.build({
      entryPoints: [join(project, main)],
      bundle: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      outfile: file,
      logLevel: 'silent',
    });
    const { default: s } = await import(pathToFileURL(file).href);
    const m = s?.metadata;
    if (typeof m?.name !== 'string' || typeof m.inputSchema !== 'string') return {};
    return { [m.name]: { inputSchema: m.inputSchema, outputSchema: m.outputSchema } };
  } catch (e) {
    console.error(`weft guest build: ${main} did not run in Node (${String(e?.message ?? e).split('\n')[0]}); its schemas are made inside the component`);
    return {};
  } finally {
    rmSync(file, { force: true });
  }
}
// componentize-js exports only an ESM entry (no package.json subpath).
const cjsDir = join(toolchain, 'node_modules/@bytecodealliance/componentize-js');
const cjsPkg = JSON.parse(readFileSync(join(cjsDir, 'package.json'), 'utf8'));
const { componentize } = await import(pathToFileURL(join(cjsDir, cjsPkg.exports.import)).href);

const bundlePath = join(work, `${pkg.name ?? 'step'}.${process.pid}.bundle.js`);

let started = Date.now();
let keptAsText;
try {
  // zod's modules a step does not need stay text until used: lazy-build.mjs.
  keptAsText = await bundle(esbuild, {
    stdin: { contents: entry, resolveDir: project, sourcefile: 'weft-entry.js', loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    mainFields: ['module', 'main'],
    target: 'es2022',
    external: [HOST],
    plugins: [schemasModule],
    outfile: bundlePath,
    logLevel: 'error',
    legalComments: 'none',
    minify: true,
  }, { runtime: project });
} catch {
  // esbuild printed the errors, with file and line.
  process.exit(1);
}
const kB = (n) => `${(n / 1e3).toFixed(0)} kB`;
console.error(
  `weft guest build: bundled ${main} (${kB(readFileSync(bundlePath).length)}, ${kB(keptAsText)} of it zod kept as text until used) in ${((Date.now() - started) / 1000).toFixed(1)} s`,
);

started = Date.now();
const { component } = await componentize({
  sourcePath: bundlePath,
  witPath: resolve(args.wit),
  worldName: 'step',
  // A step has no fetch(): leaving wasi:http out keeps the imports small.
  disableFeatures: ['http', 'fetch-event'],
});
const tmp = `${out}.${process.pid}.tmp`;
writeFileSync(tmp, component);
renameSync(tmp, out);
// The bundle stays beside the component's build for reading stack traces.
renameSync(bundlePath, join(work, `${pkg.name ?? 'step'}.bundle.js`));
console.error(`weft guest build: componentized (${(component.length / 1e6).toFixed(1)} MB) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
