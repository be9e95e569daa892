// The documentation's JavaScript runs as written: the first ```js block of the
// package README's "Runtime" and "Telemetry" sections, of the root README's
// "### Node" quickstart and of docs/runtime.md's "## Node" section, run by node
// from inside the package (so `from 'agent-recovery'` resolves to it).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { REPO } from './helpers.mjs';

const NODE_DIR = fileURLToPath(new URL('..', import.meta.url));

function firstJsBlock(text, heading) {
  const at = text.indexOf(heading);
  assert.ok(at >= 0, `no ${JSON.stringify(heading)} section`);
  const start = text.indexOf('```js\n', at) + '```js\n'.length;
  return text.slice(start, text.indexOf('```', start));
}

function runSnippet(code, name) {
  const file = join(NODE_DIR, `.readme-${name}-${process.pid}.mjs`);
  writeFileSync(file, code);
  try {
    return spawnSync(process.execPath, [file], { encoding: 'utf8', cwd: NODE_DIR });
  } finally {
    rmSync(file, { force: true });
  }
}

test('node/README.md, "Runtime": the quickstart runs and prints what its comment says', () => {
  const code = firstJsBlock(readFileSync(join(NODE_DIR, 'README.md'), 'utf8'), '\n## Runtime\n');
  const r = runSnippet(code, 'runtime');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^ok \{ id: 'ch_1' \}$/m);
});

test('README.md, "### Node": the quickstart runs; the call is retried once and answers', () => {
  const code = firstJsBlock(readFileSync(join(REPO, 'README.md'), 'utf8'), '\n### Node\n');
  const r = runSnippet(code, 'quickstart');
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'ch_1');
});

test('docs/runtime.md, "## Node": the snippet runs; the fallback answers', () => {
  const code = firstJsBlock(readFileSync(join(REPO, 'docs', 'runtime.md'), 'utf8'), '\n## Node\n');
  const r = runSnippet(`${code}\nconsole.log(JSON.stringify([r.outcome, r.result]));\n`, 'root');
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim().split('\n').at(-1), '["ok","hi"]');
});

test('node/README.md, "Telemetry": the quickstart runs; the console exporters print the documented spans and metrics', () => {
  const code = firstJsBlock(readFileSync(join(NODE_DIR, 'README.md'), 'utf8'), '\n### Telemetry\n');
  const r = runSnippet(code, 'telemetry');
  assert.equal(r.status, 0, r.stderr);
  const names = [...r.stdout.matchAll(/^ {2}name: '([^']+)',$/gm)].map((m) => m[1]);
  assert.deepEqual(names, ['agent_recovery.attempt', 'agent_recovery.attempt', 'agent_recovery.step'], r.stdout);
  assert.match(r.stdout, /'error\.type': 'tool\.http\.503_unavailable',\n {4}'agent_recovery\.action': 'retry',\n {4}'agent_recovery\.delay_ms': 53,/);
  assert.match(r.stdout, /^ok$/m);
  for (const m of ['attempts', 'decisions', 'retry.delay', 'steps']) assert.match(r.stdout, new RegExp(`name: 'agent_recovery\\.${m.replace('.', '\\.')}'`));
});
