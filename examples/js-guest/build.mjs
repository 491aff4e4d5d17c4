// Builds guest.js into build/guest.wasm, a component of the `step` world.
//
//   node build.mjs          (installs node_modules first when it is missing)
//
// Skips the build when build/guest.wasm is newer than its sources; exits 77
// when npm is needed but missing. Uses the
// componentize-js JS API: the `jco componentize` CLI fails on this setup.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const witPath = resolve(here, '../../wit');
const sourcePath = join(here, 'guest.js');
const out = join(here, 'build/guest.wasm');
const sources = [sourcePath, join(here, 'build.mjs'), join(here, 'package-lock.json'), join(witPath, 'step.wit')];

const mtime = (p) => statSync(p).mtimeMs;
if (existsSync(out) && sources.every((s) => mtime(s) < mtime(out))) process.exit(0);

const pkg = join(here, 'node_modules/@bytecodealliance/componentize-js/package.json');
if (!existsSync(pkg)) {
  console.error('js-guest: installing dependencies (npm)');
  const npm = (args, stdio = ['ignore', 2, 2]) =>
    execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd: here, stdio });
  try {
    try {
      npm(['ci'], 'ignore');
    } catch (e) {
      if (e.code === 'ENOENT') throw e;
      // `npm ci` refuses a lock file that lacks other platforms' optional
      // binaries; this installs the same locked versions.
      npm(['install', '--no-save']);
    }
  } catch (e) {
    if (e.code !== 'ENOENT') throw e;
    console.error('js-guest: npm not found (run examples/setup.sh)');
    process.exit(77); // the toolchain is missing: skip
  }
}

const { componentize } = await import('@bytecodealliance/componentize-js');
const started = Date.now();
const { component } = await componentize({
  sourcePath,
  witPath,
  worldName: 'step',
  // The step needs no fetch(); leaving wasi:http out keeps the imports small.
  disableFeatures: ['http', 'fetch-event'],
});
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out + '.tmp', component);
renameSync(out + '.tmp', out);
console.error(`js-guest: ${out} (${(component.length / 1e6).toFixed(1)} MB) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
