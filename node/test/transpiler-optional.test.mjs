// The transpiler (@bytecodealliance/jco-transpile, and binaryen under it) is an
// optional peer dependency: a process where it cannot be found still loads and
// runs the shipped reference, and loading any other component fails with a
// clear PolicyLoadError naming the package to install. The module is hidden
// by a real resolve hook (node:module register), not by a stub of our code.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { artifact } from './helpers.mjs';

const NODE_DIR = fileURLToPath(new URL('..', import.meta.url));

const HIDE = `
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`
export async function resolve(specifier, context, next) {
  if (specifier === '@bytecodealliance/jco-transpile' || specifier.startsWith('@bytecodealliance/jco-transpile/')) {
    const e = new Error('Cannot find package ' + specifier);
    e.code = 'ERR_MODULE_NOT_FOUND';
    throw e;
  }
  return next(specifier, context);
}\`));
`;

const PROGRAM = `
import { readFileSync } from 'node:fs';
import { Policy } from './src/index.js';
const out = {};
const reference = await Policy.load();
out.decision = JSON.parse(reference.decideJson('{"source":"http","status":503}', '{"attempt":1,"seed":7}')).action;
try {
  await Policy.load(readFileSync(process.argv[1]));
  out.custom = 'loaded';
} catch (e) {
  out.custom = { name: e.name, reason: e.reason, code: e.code, message: e.message };
}
console.log(JSON.stringify(out));
`;

function run(hide) {
  const args = hide ? ['--import', `data:text/javascript,${encodeURIComponent(HIDE)}`] : [];
  const r = spawnSync(process.execPath, [...args, '--input-type=module', '-e', PROGRAM, artifact('payments-policy')], {
    cwd: NODE_DIR,
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

test('without the transpiler the reference runs and a custom policy gets a clear error', () => {
  const got = run(true);
  assert.equal(got.decision, 'retry');
  assert.equal(got.custom.name, 'PolicyLoadError');
  assert.equal(got.custom.reason, 'transpiler_missing');
  assert.equal(got.custom.code, 'load');
  assert.match(got.custom.message, /npm install @bytecodealliance\/jco-transpile@0\.15\.0/);
});

test('with the transpiler installed (a dev dependency here) the same custom policy loads', () => {
  assert.deepEqual(run(false), { decision: 'retry', custom: 'loaded' });
});

test('the package declares the transpiler as an optional peer, not a dependency', () => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  assert.equal(pkg.dependencies['@bytecodealliance/jco-transpile'], undefined);
  assert.equal(pkg.peerDependenciesMeta['@bytecodealliance/jco-transpile'].optional, true);
  assert.equal(`@bytecodealliance/jco-transpile@${pkg.peerDependencies['@bytecodealliance/jco-transpile']}`, '@bytecodealliance/jco-transpile@0.15.0');
});
