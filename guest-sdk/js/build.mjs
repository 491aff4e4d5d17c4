// Builds a JavaScript or TypeScript step into a component of the `step`
// world: esbuild bundles the project's step module (package.json `main`)
// with an entry that exports `describe` and `run`, and componentize-js
// turns the bundle into a component. `weft guest build` runs it:
//
//   node build.mjs --project DIR --toolchain DIR --wit DIR --out FILE
//
// `--toolchain` is a folder where the pinned toolchain (toolchain/package.json)
// is installed. Progress goes to stderr.
import { mkdirSync, readFileSync, renameSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

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

// The entry: the step module's default export, wired to the WIT host
// imports, exported as the world's `describe` and `run`.
const defaults = { version: pkg.version, description: pkg.description };
const entry = `
import { log, progress, artifact } from ${JSON.stringify(HOST)};
import { __component } from 'weft-guest/component';
import step from ${JSON.stringify('./' + main.replace(/^\.\//, ''))};
const glue = __component(step, { log, progress, artifact }, ${JSON.stringify(defaults)});
export const describe = glue.describe;
export const run = glue.run;
`;

const toolchain = resolve(args.toolchain);
const require = createRequire(join(toolchain, 'package.json'));
const esbuild = require('esbuild');
// componentize-js exports only an ESM entry (no package.json subpath).
const cjsDir = join(toolchain, 'node_modules/@bytecodealliance/componentize-js');
const cjsPkg = JSON.parse(readFileSync(join(cjsDir, 'package.json'), 'utf8'));
const { componentize } = await import(pathToFileURL(join(cjsDir, cjsPkg.exports.import)).href);

const out = resolve(args.out);
const work = join(dirname(out), '.weft');
mkdirSync(work, { recursive: true });
const bundlePath = join(work, `${pkg.name ?? 'step'}.${process.pid}.bundle.js`);

let started = Date.now();
try {
  await esbuild.build({
    stdin: { contents: entry, resolveDir: project, sourcefile: 'weft-entry.js', loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    mainFields: ['module', 'main'],
    target: 'es2022',
    external: [HOST],
    outfile: bundlePath,
    logLevel: 'error',
    legalComments: 'none',
    minify: true,
  });
} catch {
  // esbuild printed the errors, with file and line.
  process.exit(1);
}
console.error(`weft guest build: bundled ${main} (${(readFileSync(bundlePath).length / 1e3).toFixed(0)} kB) in ${((Date.now() - started) / 1000).toFixed(1)} s`);

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
