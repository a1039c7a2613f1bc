#!/usr/bin/env node
// cairn-js-build: turns a JavaScript plugin project into a Cairn component.
//
//   cairn-js-build [--entry src/index.js] [--wit wit] [--out dist] [--keep-bundle]
//
// Run from the project root (`npm run build` does). It reads `cairn-plugin.toml`, then:
// 1. writes a copy of the WIT whose world imports only the capabilities the manifest declares
//    (componentize-qjs imports every interface of the world, used or not, and the host refuses a
//    component importing a capability its manifest does not declare);
// 2. bundles a generated entry (it imports those capabilities, hands them to the SDK's
//    `installHost`, makes reading the clock throw a clear error (`guardSandbox`: the clock is
//    stubbed out, and reading it would trap as `unreachable`) and re-exports the plugin's export) with esbuild into one ES module:
//    componentize-qjs resolves imports only under the entry's own directory, so the SDK
//    (a symlink to `../../sdk/js` in the repo, `cairn-sdk/` in a scaffolded project) must be inlined;
// 3. runs `jco componentize --backend quickjs --backend-qjs-disable-async --backend-qjs-stub-wasi`
//    (a synchronous component with no WASI imports at all);
// 4. writes `dist/<name>.wasm` and copies the manifest to `dist/<name>.toml`, so `dist/` is a
//    directory `--plugin-dir` can load.
// esbuild, jco and smol-toml are resolved from the project (its devDependencies, pinned by its
// package-lock.json), not from the SDK.

import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

import { lineTable } from '../src/stack.js';

/** The world each kind of plugin implements, and the function it exports. */
const WORLDS = {
  strategy: { world: 'strategy', export: 'compact' },
  trigger: { world: 'trigger', export: 'decide' },
  'commit-policy': { world: 'commit-policy', export: 'decide' },
};
const CAPABILITIES = ['log', 'tokens', 'model', 'archive'];
const PACKAGE = 'cairn:compaction';
/** The contract of the WIT directory the build reads. */
const VERSION = '0.2.0';
/**
 * The contract a strategy component speaks to the host, for now 0.1.0 (the host links both):
 * 0.2.0's `compact(history: borrow<history>, …)` traps in every QuickJS component, because
 * componentize-qjs 0.4.5 (jco 1.35.0) in its synchronous mode drops a borrowed handle only in
 * post-return, after wasmtime has checked that none remains ("borrow handles still remain at the
 * end of the call"). `strategyExport` serves both shapes; set this to VERSION once that is fixed.
 */
const STRATEGY_WIRE = '0.1.0';

/**
 * Appends to the bundle the table that maps its lines back to the project's sources (read from
 * esbuild's source map), so the SDK reports an uncaught error at `src/index.js:LINE` rather
 * than at a line of the bundle. Appended code moves no earlier line.
 * @param {string} bundle
 * @param {string} projectDir
 */
function appendLineTable(bundle, projectDir) {
  const map = JSON.parse(readFileSync(`${bundle}.map`, 'utf8'));
  const sources = map.sources.map((/** @type {string} */ source) => relative(projectDir, resolve(dirname(bundle), source)).split('\\').join('/'));
  const table = { file: basename(bundle), sources, lines: lineTable(map) };
  writeFileSync(bundle, `${readFileSync(bundle, 'utf8')}\nglobalThis.__cairnSourceLines = ${JSON.stringify(table)};\n`);
}

/** A build error: printed without a stack, after the work directory is removed. */
class BuildError extends Error {}

/** @param {string} message @returns {never} */
function fail(message) {
  throw new BuildError(message);
}

/**
 * Loads a build tool from the project's node_modules.
 * @param {string} projectDir
 * @param {string} name
 */
async function projectModule(projectDir, name) {
  const require = createRequire(join(projectDir, 'package.json'));
  let path;
  try {
    path = require.resolve(name);
  } catch {
    fail(`${name} is not installed in ${projectDir}: run \`npm install\` first (it is a devDependency)`);
  }
  return { path, module: await import(pathToFileURL(path).href) };
}

/**
 * The manifest's fields the build needs, checked as the host checks them.
 * @param {string} projectDir
 */
async function readManifest(projectDir) {
  const file = join(projectDir, 'cairn-plugin.toml');
  if (!existsSync(file)) {
    fail(`no cairn-plugin.toml in ${projectDir}`);
  }
  const { module: toml } = await projectModule(projectDir, 'smol-toml');
  let manifest;
  try {
    manifest = toml.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    fail(`cairn-plugin.toml: ${error instanceof Error ? error.message : error}`);
  }
  const { name, kind } = manifest;
  if (typeof name !== 'string' || !/^[a-z0-9-]{1,64}$/.test(name)) {
    fail(`cairn-plugin.toml: name ${JSON.stringify(name)} must be 1-64 characters of a-z 0-9 -`);
  }
  if (!Object.hasOwn(WORLDS, kind)) {
    fail(`cairn-plugin.toml: kind ${JSON.stringify(kind)} must be one of ${Object.keys(WORLDS).join(', ')}`);
  }
  const declared = [...(manifest.capabilities ?? []), ...(manifest.optional_capabilities ?? [])];
  for (const capability of declared) {
    if (!CAPABILITIES.includes(capability)) {
      fail(`cairn-plugin.toml: unknown capability ${JSON.stringify(capability)} (known: ${CAPABILITIES.join(', ')})`);
    }
  }
  return { file, name, kind: /** @type {keyof typeof WORLDS} */ (kind), declared: CAPABILITIES.filter((c) => declared.includes(c)) };
}

/**
 * Copies the WIT package into `into`, keeping in the plugin's world only the capability imports
 * the manifest declares, as contract `wire`.
 * @param {string} witDir
 * @param {string} world
 * @param {string[]} declared
 * @param {string} into
 * @param {string} wire
 */
function narrowWit(witDir, world, declared, into, wire) {
  const files = readdirSync(witDir).filter((f) => f.endsWith('.wit'));
  if (!files.includes('worlds.wit')) {
    fail(`${witDir} has no worlds.wit: pass the cairn:compaction@${VERSION} WIT directory with --wit`);
  }
  for (const file of files) {
    let text = readFileSync(join(witDir, file), 'utf8');
    const pkg = text.match(/^package cairn:compaction@([0-9.]+);/m);
    if (pkg && pkg[1] !== VERSION) {
      fail(`${join(witDir, file)} is cairn:compaction@${pkg[1]}: this SDK builds against @${VERSION} (pass its WIT with --wit)`);
    }
    if (wire === '0.1.0') {
      text = asContract010(file, text);
    }
    if (file === 'worlds.wit') {
      const block = new RegExp(`(world\\s+${world}\\s*\\{)([\\s\\S]*?)(\\n\\})`);
      const found = text.match(block);
      if (!found) {
        fail(`${join(witDir, file)} has no world ${world}`);
      }
      // Only capabilities are narrowed: `conversation` (the strategy's lent history) is no grant.
      const keep = (/** @type {string} */ name) => !CAPABILITIES.includes(name) || declared.includes(name);
      const body = found[2].replace(/^[ \t]*import[ \t]+([a-z-]+)[ \t]*;[^\n]*\n?/gm, (line, name) => (keep(name) ? line : ''));
      text = text.replace(block, `$1${body}$3`);
    }
    writeFileSync(join(into, file), text);
  }
}

/**
 * The 0.2.0 WIT as the 0.1.0 contract the host also links: the strategy gets every entry in
 * `compact-request` and answers with whole entries; everything else is the same.
 * @param {string} file
 * @param {string} text
 */
function asContract010(file, text) {
  /** @type {(from: RegExp | string, to: string) => void} */
  const edit = (from, to) => {
    const next = text.replace(from, to);
    if (next === text) fail(`${file}: cannot find ${from} to build a cairn:compaction@0.1.0 strategy`);
    text = next;
  };
  edit(/^package cairn:compaction@[0-9.]+;/m, 'package cairn:compaction@0.1.0;');
  if (file === 'types.wit') {
    edit(/(record compact-request \{[^}]*?\n([ \t]*)archive-id: string,\n)/, '$1$2entries: list<entry>,\n');
    edit('replacement: list<replacement-entry>,', 'replacement: list<entry>,');
    // A field newer than 0.1.0 (with its doc comment): records must match the host's field by field.
    text = text.replace(/(?:^[ \t]*\/\/\/[^\n]*\n)*^[ \t]*previous-checkpoint-through: option<string>,\n/m, '');
  }
  if (file === 'worlds.wit') {
    edit(/^[ \t]*import conversation;[^\n]*\n/m, '');
    edit(/^[ \t]*use conversation\.\{history\};[^\n]*\n/m, '');
    edit('compact: func(history: borrow<history>, request: compact-request)', 'compact: func(request: compact-request)');
  }
  return text;
}

async function main() {
  const { values } = parseArgs({
    options: {
      entry: { type: 'string', default: 'src/index.js' },
      wit: { type: 'string', default: 'wit' },
      out: { type: 'string', default: 'dist' },
      'keep-bundle': { type: 'boolean', default: false },
    },
  });
  const started = Date.now();
  const projectDir = process.cwd();
  const manifest = await readManifest(projectDir);
  const { world, export: exported } = WORLDS[manifest.kind];
  const wire = manifest.kind === 'strategy' ? STRATEGY_WIRE : VERSION;
  const entry = resolve(projectDir, values.entry);
  const witDir = resolve(projectDir, values.wit);
  const outDir = resolve(projectDir, values.out);
  if (!existsSync(entry)) {
    fail(`entry ${relative(projectDir, entry)} not found (pass --entry)`);
  }
  if (!existsSync(witDir) || !statSync(witDir).isDirectory()) {
    fail(`WIT directory ${values.wit} not found (pass --wit)`);
  }

  const work = mkdtempSync(join(tmpdir(), `cairn-js-build-${manifest.name}-`));
  try {
    const wit = join(work, 'wit');
    mkdirSync(wit);
    narrowWit(witDir, world, manifest.declared, wit, wire);

    // The component's entry: capabilities in, the plugin's export out.
    const imports = manifest.declared.map((c) => `import * as ${c} from '${PACKAGE}/${c}@${wire}';`);
    const source = [
      `import { guardSandbox, installHost } from '@cairn/sdk';`,
      ...imports,
      // The clock is not granted: reading it throws an error that says so, not a trap.
      `guardSandbox();`,
      `installHost({ ${manifest.declared.join(', ')} });`,
      `export { ${exported} } from ${JSON.stringify(entry)};`,
      '',
    ].join('\n');
    const { module: esbuild } = await projectModule(projectDir, 'esbuild');
    const bundle = join(work, `${manifest.name}.js`);
    try {
      await esbuild.build({
        stdin: { contents: source, resolveDir: projectDir, sourcefile: 'cairn-entry.js', loader: 'js' },
        bundle: true,
        format: 'esm',
        platform: 'neutral',
        // QuickJS (quickjs-ng) runs ES2023; nothing needs lowering.
        target: 'es2023',
        external: [`${PACKAGE}/*`],
        outfile: bundle,
        sourcemap: 'external',
        logLevel: 'warning',
      });
    } catch {
      fail('bundling failed (esbuild said why above)');
    }
    appendLineTable(bundle, projectDir);
    if (values['keep-bundle']) {
      mkdirSync(outDir, { recursive: true });
      copyFileSync(bundle, join(outDir, `${manifest.name}.bundle.js`));
    }

    mkdirSync(outDir, { recursive: true });
    const wasm = join(outDir, `${manifest.name}.wasm`);
    const { path: jcoApi } = await projectModule(projectDir, '@bytecodealliance/jco');
    const jco = join(dirname(jcoApi), 'jco.js');
    // Absolute paths: jco changes into the entry's directory before it reads the source.
    const args = [jco, 'componentize', bundle, '--wit', wit, '--world-name', world, '--backend', 'quickjs', '--backend-qjs-disable-async', '--backend-qjs-stub-wasi', '-o', wasm];
    const run = spawnSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
    if (run.status !== 0) {
      process.stdout.write(run.stdout ?? '');
      fail(`jco componentize failed (exit ${run.status})`);
    }
    copyFileSync(manifest.file, join(outDir, `${manifest.name}.toml`));
    const size = (statSync(wasm).size / 1024 / 1024).toFixed(1);
    const millis = Date.now() - started;
    console.log(`cairn-js-build: ${relative(projectDir, wasm)} (${manifest.kind}, cairn:compaction@${wire}, ${size} MiB, imports: ${manifest.declared.join(', ') || 'none'}) in ${millis} ms`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

try {
  await main();
} catch (error) {
  if (!(error instanceof BuildError)) throw error;
  console.error(`cairn-js-build: ${error.message}`);
  process.exitCode = 1;
}
