// Build time: which modules a component keeps as text (lazy.js says why),
// and the esbuild bundle that does it. `bundle(esbuild, options)` bundles
// twice: once to learn which modules the component's bundle holds, then
// with each kept-as-text module replaced by a stand-in module that holds
// its own bundle (CommonJS, as a string) and the modules that bundle shares
// with the component's, so zod's state (its registries, its config) stays
// one. The stand-in's exports are those Node sees when it imports the real
// module, so any zod version works; a module a step does use at its top
// level is simply evaluated before the snapshot, as before.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * zod's modules a step does not need inside its component, unless it asks
 * for them: the messages in languages other than English (the English ones
 * are zod's default and stay), the JSON Schema generator (the build makes
 * the schemas in Node), zod's JSON Schema reader and its schema compiler.
 */
export const KEPT_AS_TEXT =
  /[\\/]node_modules[\\/]zod[\\/]v4[\\/](?:locales[\\/]index|core[\\/](?:compile|json-schema-processors|to-json-schema|json-schema-generator)|classic[\\/]from-json-schema)\.js$/;

/**
 * esbuild's `build(options)` (an ESM bundle), with the modules `kept`
 * matches kept as text. `runtime` is the directory `weft-guest/lazy`
 * resolves from. Returns how many bytes of the bundle are kept as text.
 */
export async function bundle(esbuild, options, { kept = KEPT_AS_TEXT, runtime }) {
  const cwd = options.absWorkingDir ?? process.cwd();
  const plugins = options.plugins ?? [];
  const probe = await esbuild.build({
    ...options,
    write: false,
    metafile: true,
    plugins: [...plugins, standIns(esbuild, options, { kept, runtime, shared: undefined })],
  });
  // Inputs are paths relative to the working directory, or `namespace:path`.
  const shared = new Set(
    Object.keys(probe.metafile.inputs)
      .filter((k) => !k.includes(':') && k !== '<stdin>')
      .map((k) => resolve(cwd, k)),
  );
  const tally = { bytes: 0 };
  await esbuild.build({ ...options, plugins: [...plugins, standIns(esbuild, options, { kept, runtime, shared, tally })] });
  return tally.bytes;
}

/**
 * The plugin that loads a stand-in for each kept module. Without `shared`
 * (the first pass) the stand-ins have the right exports but no text.
 */
function standIns(esbuild, options, { kept, runtime, shared, tally }) {
  return {
    name: 'weft-kept-as-text',
    setup(b) {
      b.onLoad({ filter: kept }, async ({ path }) => {
        const contents = await standIn(esbuild, options, path, shared, tally);
        return contents === undefined ? undefined : { contents, resolveDir: runtime, loader: 'js' };
      });
    },
  };
}

/**
 * The stand-in module's source for the module at `path` (undefined: bundle
 * it as it is); `tally.bytes` counts the text it keeps.
 */
async function standIn(esbuild, options, path, shared, tally) {
  let real;
  try {
    real = await import(pathToFileURL(path).href);
  } catch {
    return undefined; // Node cannot load it alone: it is bundled as it is.
  }
  const exports = [];
  for (const [name, value] of Object.entries(real)) {
    const expr = standInFor(value, name);
    if (expr === undefined) return undefined;
    exports.push([name, expr]);
  }
  const deps = new Map();
  const text = shared === undefined ? '' : await textOf(esbuild, options, path, shared, deps);
  if (tally !== undefined) tally.bytes += text.length;
  const lines = [`import { lazyModule } from 'weft-guest/lazy';`];
  const keys = [];
  for (const [file, key] of deps) {
    lines.push(`import * as d${keys.length} from ${JSON.stringify(file)};`);
    keys.push(`${JSON.stringify(key)}: d${keys.length}`);
  }
  lines.push(`const m = lazyModule(${JSON.stringify(text)}, { ${keys.join(', ')} });`);
  exports.forEach(([name, expr], i) => lines.push(`const e${i} = ${expr};`, `export { e${i} as ${name} };`));
  return lines.join('\n');
}

/** The expression that stands in for an export (undefined when none can). */
function standInFor(value, name) {
  const n = JSON.stringify(name);
  switch (typeof value) {
    case 'function':
      return `m.fn(${n})`;
    case 'object':
      return value === null ? 'null' : `m.obj(${n})`;
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      return Object.is(value, -0) ? '-0' : String(value);
    case 'bigint':
      return `${value}n`;
    case 'undefined':
      return 'void 0';
    case 'symbol': {
      const key = Symbol.keyFor(value);
      return key === undefined ? undefined : `Symbol.for(${JSON.stringify(key)})`;
    }
    default:
      return undefined;
  }
}

/**
 * The module's own bundle (CommonJS): a module the component's bundle holds
 * (`shared`) is left out and asked for by key; `deps` gets file → key.
 */
async function textOf(esbuild, options, path, shared, deps) {
  const skip = Symbol('weft.resolving');
  const result = await esbuild.build({
    entryPoints: [path],
    bundle: true,
    format: 'cjs',
    platform: options.platform,
    mainFields: options.mainFields,
    target: options.target,
    minify: true,
    legalComments: 'none',
    logLevel: 'error',
    write: false,
    plugins: [
      {
        name: 'weft-shared',
        setup(b) {
          b.onResolve({ filter: /.*/ }, async (args) => {
            if (args.pluginData === skip || args.kind === 'entry-point') return undefined;
            const r = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: skip });
            if (r.errors.length > 0) return undefined;
            if (!shared.has(r.path) || r.path === path) return { path: r.path, namespace: r.namespace, sideEffects: r.sideEffects, suffix: r.suffix };
            if (!deps.has(r.path)) deps.set(r.path, `#${deps.size}`);
            return { path: deps.get(r.path), external: true };
          });
        },
      },
    ],
  });
  return result.outputFiles[0].text;
}
