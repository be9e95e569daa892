// docs/integrations/mcp.md, "## Quickstart (Node)": the block runs as written,
// imported from inside the package (so 'agent-recovery/mcp' resolves to it),
// against a real McpServer over streamable HTTP on 127.0.0.1 (mcp_server.mjs).
// Expected: 1 / 4 is 0.25; a RangeError thrown by a tool is an unhandled
// exception, `tool.exception.unhandled` (docs/errors.md).

import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { REPO } from './helpers.mjs';
import { serveMcp } from './mcp_server.mjs';

const NODE_DIR = fileURLToPath(new URL('..', import.meta.url));

test('docs/integrations/mcp.md, "## Quickstart (Node)": runs as written', async () => {
  const text = readFileSync(join(REPO, 'docs', 'integrations', 'mcp.md'), 'utf8');
  const at = text.indexOf('\n## Quickstart (Node)\n');
  assert.ok(at >= 0, 'no Node quickstart');
  const start = text.indexOf('```js\n', at) + '```js\n'.length;
  const code = text.slice(start, text.indexOf('```', start));
  assert.ok(code.trimEnd().split('\n').length <= 15, 'the quickstart is at most 15 lines');
  const file = join(NODE_DIR, `.docs-mcp-${process.pid}.mjs`);
  writeFileSync(file, code);
  let quickstart;
  try {
    quickstart = await import(pathToFileURL(file).href);
  } finally {
    rmSync(file, { force: true });
  }
  const served = await serveMcp(quickstart.addTools);
  try {
    const ok = await quickstart.ask(served.url.href, 4);
    assert.equal(ok.content[0].text, '0.25');
    const failed = await quickstart.ask(served.url.href, 0);
    assert.equal(failed.error.code, 'tool.exception.unhandled');
    assert.equal(failed.error.retryable, false);
  } finally {
    await served.close();
  }
});
