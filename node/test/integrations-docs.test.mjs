// The quickstarts of docs/integrations/ai-sdk.md and openai-agents-js.md run as
// written (the first ```js block, at most 15 lines), from inside the package so
// that `agent-recovery/ai-sdk` resolves to it, against the scripted provider
// and payment tool (tests/frameworks/scripted_server.py): the charge's first
// response is lost after it was applied (503), so the quickstart must retry with
// the same key and the card must be charged once.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { REPO } from './helpers.mjs';
import { scriptedServer } from './scripted_server.mjs';

const NODE_DIR = fileURLToPath(new URL('..', import.meta.url));

let server;
before(async () => {
  server = await scriptedServer();
});
after(() => server.close());

function quickstart(page) {
  const text = readFileSync(join(REPO, 'docs', 'integrations', page), 'utf8');
  const start = text.indexOf('```js\n') + '```js\n'.length;
  return text.slice(start, text.indexOf('```', start));
}

async function runQuickstart(page) {
  const code = quickstart(page);
  assert.ok(code.trim().split('\n').length <= 15, `${page}: the quickstart has more than 15 lines`);
  const file = join(NODE_DIR, `.quickstart-${process.pid}.mjs`);
  writeFileSync(file, code);
  try {
    const env = {
      ...process.env,
      OPENAI_BASE_URL: `${server.url}/v1`,
      OPENAI_API_KEY: 'sk-test',
      PAYMENTS_URL: server.url,
      OPENAI_AGENTS_DISABLE_TRACING: '1',
    };
    // The server is a child process: blocking this one while the quickstart runs is harmless.
    return spawnSync(process.execPath, [file], { encoding: 'utf8', cwd: NODE_DIR, env });
  } finally {
    rmSync(file, { force: true });
  }
}

for (const page of ['ai-sdk.md', 'openai-agents-js.md']) {
  test(`docs/integrations/${page}: the quickstart charges once through a lost response and answers`, async () => {
    await server.script({ charge: [{ status: 503, apply: true }] }, { amount: 10 });
    const r = await runQuickstart(page);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'done');
    const s = await server.stats();
    assert.equal(s.charges, 1);
    const keys = s.log.filter((l) => l.route === 'charge').map((l) => l.key);
    assert.equal(keys.length, 2);
    assert.equal(new Set(keys).size, 1);
  });
}
