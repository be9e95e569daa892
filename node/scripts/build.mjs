#!/usr/bin/env node
// Build step: find (or build) the reference policy component and transpile it
// with jco into gen/, which the package loads by default.
//
//   node scripts/build.mjs [--force]
//
// The component is, in order of preference:
//   1. $AGENT_RECOVERY_WASM, when set (cargo is not run);
//   2. built by `cargo build -p agent-recovery-policy --release --config guest/release.toml --target wasm32-wasip2`
//      in the repository (skipped when $AGENT_RECOVERY_SKIP_CARGO=1 or cargo is missing),
//      at target/wasm32-wasip2/release/agent_recovery_policy.wasm.
// gen/ is rewritten only when the component's sha256 or the transpiler changed
// (or with --force). The Redis store's Lua scripts (host/src/store/redis/*.lua)
// and the SQLite store's schema (host/src/store/schema.sql) are copied into
// src/redis/ and src/ first, when this is a repository checkout.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transpileBytes } from '@bytecodealliance/jco-transpile';
import { GRANTED_IMPORTS, TRANSPILE_OPTIONS, bindingsSource, importNames, sha256 } from '../src/component.js';

const NODE_DIR = fileURLToPath(new URL('..', import.meta.url));
const REPO = join(NODE_DIR, '..');
const GEN = join(NODE_DIR, 'gen');
/** Bumped when gen/ is made differently (so an old gen/ is rebuilt). */
const GEN_FORMAT = 2;
const DEFAULT_WASM = join(REPO, 'target', 'wasm32-wasip2', 'release', 'agent_recovery_policy.wasm');

function log(msg) {
  process.stderr.write(`build: ${msg}\n`);
}

async function transpilerVersion() {
  const pkg = JSON.parse(
    await readFile(join(NODE_DIR, 'node_modules', '@bytecodealliance', 'jco-transpile', 'package.json'), 'utf8'),
  );
  return `${pkg.name}@${pkg.version}`;
}

function locateComponent() {
  const fromEnv = process.env.AGENT_RECOVERY_WASM;
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new Error(`AGENT_RECOVERY_WASM=${fromEnv} does not exist; point it at a built component or unset it`);
    return fromEnv;
  }
  if (process.env.AGENT_RECOVERY_SKIP_CARGO !== '1') {
    // guest/release.toml: the guest profile every host builds with (same bytes everywhere).
    const args = ['build', '-p', 'agent-recovery-policy', '--release', '--config', join(REPO, 'guest', 'release.toml'), '--target', 'wasm32-wasip2'];
    log(`cargo ${args.join(' ')}`);
    const r = spawnSync('cargo', args, { cwd: REPO, stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.error?.code === 'ENOENT') {
      log('cargo not found; using the component already built, if any');
    } else if (r.status !== 0) {
      throw new Error(
        `cargo build failed (exit ${r.status}); run \`rustup target add wasm32-wasip2\` if the target is missing, or set AGENT_RECOVERY_WASM`,
      );
    }
  }
  if (!existsSync(DEFAULT_WASM)) {
    throw new Error(`no component at ${DEFAULT_WASM}; build it with cargo (see README) or set AGENT_RECOVERY_WASM`);
  }
  return DEFAULT_WASM;
}

/** Copy `host/src/store/<from>` to `node/src/<to>` when it differs. */
function copyStoreFile(from, to) {
  const text = readFileSync(join(REPO, 'host', 'src', 'store', from));
  const target = join(NODE_DIR, 'src', to);
  if (!existsSync(target) || !readFileSync(target).equals(text)) {
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, text);
    log(`copied host/src/store/${from} into src/${to}`);
  }
}

/**
 * Copy host/src/store/redis/*.lua into src/redis/ and host/src/store/schema.sql
 * into src/ (the package ships the copies; tests compare them). Outside a
 * checkout the copies must already be there (a packed package has them).
 */
function copyStoreFiles() {
  const from = join(REPO, 'host', 'src', 'store');
  if (!existsSync(from)) {
    if (!existsSync(join(NODE_DIR, 'src', 'schema.sql'))) throw new Error('no host/src/store/ and no src/schema.sql: build from a checkout');
    return;
  }
  for (const name of readdirSync(join(from, 'redis')).filter((f) => f.endsWith('.lua'))) copyStoreFile(`redis/${name}`, `redis/${name}`);
  copyStoreFile('schema.sql', 'schema.sql');
}

async function run() {
  copyStoreFiles();
  const force = process.argv.includes('--force');
  const path = locateComponent();
  const bytes = await readFile(path);
  const digest = sha256(bytes);
  const transpiler = await transpilerVersion();

  if (!force) {
    try {
      const old = JSON.parse(await readFile(join(GEN, 'manifest.json'), 'utf8'));
      const complete = [...old.coreModules, 'policy.js', 'component.wasm'].every((f) => existsSync(join(GEN, f)));
      if (old.sha256 === digest && old.transpiler === transpiler && old.format === GEN_FORMAT && complete) {
        log(`gen/ is up to date (sha256 ${digest.slice(0, 16)}…)`);
        return;
      }
    } catch {
      // no usable gen/: build it
    }
  }

  const started = performance.now();
  const out = await transpileBytes(new Uint8Array(bytes), { ...TRANSPILE_OPTIONS });
  const exported = new Set(out.exports.map(([name]) => name.replace(/@.*$/, '')));
  const missing = ['classify', 'decide', 'backoff', 'registry', 'idempotency', 'render', 'meta']
    .map((i) => `agent:recovery/${i}`)
    .filter((i) => !exported.has(i));
  if (missing.length > 0) {
    throw new Error(
      `${path} does not export ${missing.join(', ')}; it is not the reference policy (a build of a custom policy in the same cargo invocation turns the reference's export feature off: rebuild it alone)`,
    );
  }
  const imports = importNames(out.imports);
  const denied = imports.filter((n) => !GRANTED_IMPORTS.includes(n));
  if (denied.length > 0) throw new Error(`the component imports ${denied.join(', ')}, which a policy is not granted`);

  const tmp = `${GEN}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  const coreModules = [];
  for (const [name, data] of Object.entries(out.files)) {
    if (name.endsWith('.d.ts')) continue; // the package ships its own index.d.ts
    if (name.endsWith('.wasm')) coreModules.push(name);
    await mkdir(dirname(join(tmp, name)), { recursive: true });
    await writeFile(join(tmp, name), name === 'policy.js' ? bindingsSource(data) : data);
  }
  await writeFile(join(tmp, 'component.wasm'), bytes);
  const manifest = {
    sha256: digest,
    size: bytes.length,
    source: relative(REPO, path),
    transpiler,
    format: GEN_FORMAT,
    imports,
    coreModules: coreModules.sort(),
    note: 'generated by node/scripts/build.mjs; do not edit or commit',
  };
  await writeFile(join(tmp, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await rm(GEN, { recursive: true, force: true });
  await rename(tmp, GEN);
  log(
    `transpiled ${manifest.source} (${bytes.length} bytes, sha256 ${digest.slice(0, 16)}…) with ${transpiler} into gen/ in ${Math.round(performance.now() - started)} ms`,
  );
}

run().catch((e) => {
  process.stderr.write(`build: error: ${e.message}\n`);
  process.exit(2);
});
