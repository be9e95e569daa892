// docs/integrations/a2a.md, "## Quickstart (Node)": the block runs as written,
// imported from inside the package (so 'agent-recovery/a2a' resolves to it):
// its `agent` served on 127.0.0.1, called with its `ask` (the real @a2a-js/sdk
// on both sides). Expected: HTTP 503 with `Retry-After: 3` is retryable after
// three seconds (RFC 9110 section 10.2.3), `retryAfter` in seconds in the data
// part (docs/integrations/a2a.md); an aborted ask cancels its task on the agent
// (A2A CancelTask), which then reads TASK_STATE_CANCELED.

import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { REPO } from './helpers.mjs';
import { Unavailable, Working, cardFor, hello } from './a2a_agent.mjs';

const NODE_DIR = fileURLToPath(new URL('..', import.meta.url));

let quickstart;
before(async () => {
  const text = readFileSync(join(REPO, 'docs', 'integrations', 'a2a.md'), 'utf8');
  const at = text.indexOf('\n## Quickstart (Node)\n');
  assert.ok(at >= 0, 'no Node quickstart');
  const start = text.indexOf('```js\n', at) + '```js\n'.length;
  const code = text.slice(start, text.indexOf('```', start));
  assert.ok(code.trimEnd().split('\n').length <= 15, 'the quickstart is at most 15 lines');
  const file = join(NODE_DIR, `.docs-a2a-${process.pid}.mjs`);
  writeFileSync(file, code);
  try {
    quickstart = await import(pathToFileURL(file).href);
  } finally {
    rmSync(file, { force: true });
  }
});

const servers = [];
after(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** The quickstart's `agent(card, executor)` on 127.0.0.1; its URL. */
async function serve(executor) {
  const server = createServer();
  servers.push(server);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  server.on('request', quickstart.agent(cardFor(url), executor));
  return url;
}

test('a2a.md, Node quickstart: a failed task says whether and when to retry', async () => {
  const url = await serve(new Unavailable());
  const events = [];
  for await (const e of quickstart.ask(url, hello())) events.push(e);
  const { status } = events.at(-1).payload.value;
  assert.equal(status.state, TaskState.TASK_STATE_FAILED);
  const data = status.message.parts.find((p) => p.content.$case === 'data').content.value;
  assert.deepEqual([data.retryable, data.retryAfter], [true, 3]);
});

test('a2a.md, Node quickstart: aborting the signal cancels the task on the agent', async () => {
  const executor = new Working(true);
  const url = await serve(executor);
  const ctl = new AbortController();
  let taskId;
  const consume = (async () => {
    for await (const e of quickstart.ask(url, hello(), ctl.signal)) {
      if (e.payload?.$case === 'statusUpdate' && e.payload.value.status.state === TaskState.TASK_STATE_WORKING) {
        taskId = e.payload.value.taskId;
        ctl.abort();
      }
    }
  })();
  await assert.rejects(consume, (e) => e.name === 'AbortError');
  assert.deepEqual(executor.cancelled, [taskId]);
  const task = await (await new ClientFactory().createFromUrl(url)).getTask({ id: taskId });
  assert.equal(task.status.state, TaskState.TASK_STATE_CANCELED);
});
