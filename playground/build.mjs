#!/usr/bin/env node
// Build the playground into dist/: a static site that runs the reference policy
// component in the browser.
//
//   node build.mjs          (npm run build)
//
// The component is the reference policy that host/build.rs built, found through
// target/wasm-policies/artifacts.json (key `agent-recovery-policy`), or
// $AGENT_RECOVERY_WASM when set. It is transpiled with jco's transpiler
// (@bytecodealliance/jco-transpile, as node/scripts/build.mjs does) in
// `instantiation: 'async'` mode, so the page, not the generated code, decides
// which WASI imports the component gets. dist/ holds:
//
//   index.html app.js style.css   the page (copied from src/)
//   policy/                       the transpiled reference (policy.js, core wasm,
//                                 component.wasm, manifest.json)
//   shim/                         @bytecodealliance/preview2-shim's browser modules
//   bindgen/                      jco's js-component-bindgen component (transpiles
//                                 another policy .wasm in the page), its shim
//                                 imports pointed at shim/
//   examples.js                   examples/observations/*.json and extra examples
//
// Nothing is fetched from a network: every file is local.

import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transpileBytes } from '@bytecodealliance/jco-transpile';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const REPO = join(HERE, '..');
const DIST = join(HERE, 'dist');
const MODULES = join(HERE, 'node_modules', '@bytecodealliance');

function log(msg) {
  process.stderr.write(`playground: ${msg}\n`);
}

async function locateComponent() {
  const fromEnv = process.env.AGENT_RECOVERY_WASM;
  if (fromEnv) return fromEnv;
  const artifacts = join(REPO, 'target', 'wasm-policies', 'artifacts.json');
  let list;
  try {
    list = JSON.parse(await readFile(artifacts, 'utf8'));
  } catch (e) {
    throw new Error(
      `cannot read ${relative(REPO, artifacts)} (${e.code ?? e.message}); build the host first: cargo build --release -p agent-recovery`,
    );
  }
  const path = list['agent-recovery-policy'];
  if (!path || !existsSync(path)) {
    throw new Error(`artifacts.json names no built reference policy (${path}); run cargo build --release -p agent-recovery`);
  }
  return path;
}

/** Extra examples for sources examples/observations/ has none of. */
const EXTRA = {
  'timeout-read.json': { source: 'timeout', call: 'tool', phase: 'read', after_ms: 30000 },
  'timeout-connect.json': { source: 'timeout', call: 'tool', phase: 'connect', after_ms: 5000 },
  'network-dns-not-found.json': { source: 'network', call: 'tool', code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND api.example.com' },
  'mcp-invalid-params.json': {
    source: 'mcp',
    call: 'tool',
    message: { jsonrpc: '2.0', id: 7, error: { code: -32602, message: 'Invalid params: unknown tool search_v2' } },
  },
  'a2a-task-failed.json': {
    source: 'a2a',
    call: 'agent',
    message: {
      jsonrpc: '2.0',
      id: 'r1',
      result: { kind: 'task', id: 't-9', contextId: 'c-1', status: { state: 'failed', message: { role: 'agent', parts: [{ kind: 'text', text: 'Upstream inventory service returned 500' }] } } },
    },
  },
  'anthropic-400-invalid-request.json': {
    source: 'http',
    call: 'llm',
    provider: 'anthropic',
    status: 400,
    body: { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: Field required' } },
  },
};

/** What kind of source an observation is, for grouping the examples. */
function sourceOf(obs) {
  if (obs.source) return obs.source;
  if (obs.jsonrpc) return 'jsonrpc';
  return 'other';
}

async function examples() {
  const dir = join(REPO, 'examples', 'observations');
  const out = [];
  for (const name of (await readdir(dir)).filter((n) => n.endsWith('.json')).sort()) {
    const text = await readFile(join(dir, name), 'utf8');
    out.push({ name, source: sourceOf(JSON.parse(text)), text, file: `examples/observations/${name}` });
  }
  for (const [name, obs] of Object.entries(EXTRA)) {
    out.push({ name, source: sourceOf(obs), text: `${JSON.stringify(obs, null, 2)}\n`, file: null });
  }
  return out;
}

async function run() {
  const started = performance.now();
  const path = await locateComponent();
  const bytes = await readFile(path);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const out = await transpileBytes(new Uint8Array(bytes), {
    name: 'policy',
    instantiation: 'async',
    noComponentErrorWrapping: false,
    emitTypescriptDeclarations: false,
    quiet: true,
  });

  await rm(DIST, { recursive: true, force: true });
  await mkdir(join(DIST, 'policy'), { recursive: true });
  const coreModules = [];
  for (const [name, data] of Object.entries(out.files)) {
    if (name.endsWith('.d.ts')) continue;
    if (name.endsWith('.wasm')) coreModules.push(name);
    await mkdir(dirname(join(DIST, 'policy', name)), { recursive: true });
    await writeFile(join(DIST, 'policy', name), data);
  }
  await writeFile(join(DIST, 'policy', 'component.wasm'), bytes);
  const transpiler = JSON.parse(await readFile(join(MODULES, 'jco-transpile', 'package.json'), 'utf8'));
  const manifest = {
    sha256,
    size: bytes.length,
    transpiler: `${transpiler.name}@${transpiler.version}`,
    imports: [...new Set(out.imports.map((n) => n.replace(/@[^/]*$/, '')))].sort(),
    coreModules: coreModules.sort(),
  };
  await writeFile(join(DIST, 'policy', 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);

  // The WASI shims for the browser, and jco's bindgen component (for loading another .wasm).
  const shimSrc = join(MODULES, 'preview2-shim', 'dist', 'browser');
  await cp(shimSrc, join(DIST, 'shim'), { recursive: true, filter: (src) => !src.endsWith('.d.ts') });
  await mkdir(join(DIST, 'bindgen'), { recursive: true });
  for (const f of ['js-component-bindgen-component.core.wasm', 'js-component-bindgen-component.core2.wasm']) {
    await cp(join(MODULES, 'jco-transpile', 'vendor', f), join(DIST, 'bindgen', f));
  }
  // The bindgen module imports the shims by their package names; point them at
  // shim/ (no import map, so it also loads in a module worker, where the
  // candidate is checked).
  const bindgenJs = (await readFile(join(MODULES, 'jco-transpile', 'vendor', 'js-component-bindgen-component.js'), 'utf8')).replace(
    /(['"])@bytecodealliance\/preview2-shim\/([a-z-]+)\1/g,
    (_, q, name) => `${q}../shim/${name}.js${q}`,
  );
  if (bindgenJs.includes("'@bytecodealliance/")) throw new Error('js-component-bindgen-component.js imports a package this build does not map');
  await writeFile(join(DIST, 'bindgen', 'js-component-bindgen-component.js'), bindgenJs);

  for (const f of await readdir(join(HERE, 'src'))) await cp(join(HERE, 'src', f), join(DIST, f));
  await writeFile(
    join(DIST, 'examples.js'),
    `// Generated by playground/build.mjs from examples/observations/; do not edit.\nexport default ${JSON.stringify(await examples(), null, 2)};\n`,
  );
  log(
    `built dist/ from ${relative(REPO, path) || path} (${bytes.length} bytes, sha256 ${sha256.slice(0, 16)}…) in ${Math.round(performance.now() - started)} ms`,
  );
}

run().catch((e) => {
  process.stderr.write(`playground: error: ${e.message}\n`);
  process.exit(2);
});
