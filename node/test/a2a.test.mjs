// agent-recovery/a2a against the real @a2a-js/sdk: its DefaultRequestHandler
// served by its express jsonRpcHandler on 127.0.0.1, called with its own Client.
//
// Expected values come from outside the code under test: `Retry-After: 3` is
// three seconds (RFC 9110 section 10.2.3), `retryAfter` is in seconds and
// `retryable` sits in `error.data` of the `jsonrpc-error` render
// (docs/envelope-and-decision.md, "Rendering"), TaskNotCancelableError is
// `agent.a2a.task_not_cancelable` (docs/frameworks-and-protocols.md), and the
// cancel method is the one the SDK's own client sends (recorded from the wire).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import express from 'express';
import { TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';
import { Policy, failureOf } from '../src/index.js';
import { A2ATasks, RecoveringExecutor } from '../src/a2a.js';
import { Unavailable, Working, cardFor, hello } from './a2a_agent.mjs';

let policy;
before(async () => {
  policy = await Policy.load();
});
const servers = [];
after(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** Serve `executor` as an A2A agent; `bodies` records the JSON-RPC requests. */
async function serveAgent(executor) {
  const bodies = [];
  const app = express();
  let card;
  const handler = () => new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  servers.push(server);
  const url = `http://127.0.0.1:${server.address().port}`;
  card = cardFor(url);
  const requestHandler = handler();
  app.use('/rpc', express.json(), (req, _res, next) => {
    bodies.push(req.body);
    next();
  });
  app.use('/rpc', jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: requestHandler }));
  return { url, bodies };
}

test('a failed task says whether and when to retry', async () => {
  const { url } = await serveAgent(new RecoveringExecutor(new Unavailable(), { policy }));
  const client = await new ClientFactory().createFromUrl(url);
  const events = [];
  for await (const e of client.sendMessageStream(hello())) events.push(e);
  const { status } = events.at(-1).payload.value; // a Task or a TaskStatusUpdateEvent: both carry the status
  assert.equal(status.state, TaskState.TASK_STATE_FAILED);
  const data = status.message.parts.find((p) => p.content.$case === 'data').content.value;
  assert.equal(data.retryable, true);
  assert.equal(data.retryAfter, 3);
  assert.equal(data.error.retry_after_ms, 3000);
  const envelope = policy.classify(await failureOf(events.at(-1)));
  assert.deepEqual([envelope.retryable, envelope.retry_after_ms], [true, 3000]);
});

async function cancelWhileWorking(executor) {
  const { url, bodies } = await serveAgent(executor);
  const client = await new ClientFactory().createFromUrl(url);
  const tasks = new A2ATasks(client, { policy });
  const ctl = new AbortController();
  const consume = (async () => {
    for await (const e of tasks.sendMessageStream(hello(), { signal: ctl.signal })) {
      if (e.payload?.$case === 'statusUpdate' && e.payload.value.status.state === TaskState.TASK_STATE_WORKING) ctl.abort();
    }
  })();
  await assert.rejects(consume, (e) => e.name === 'AbortError');
  return { tasks, bodies };
}

test('aborting the run sends CancelTask to the task in flight', async () => {
  const executor = new Working(true);
  const { tasks, bodies } = await cancelWhileWorking(executor);
  assert.equal(tasks.cancels.length, 1);
  const [record] = tasks.cancels;
  assert.equal(record.ok, true);
  assert.equal(record.state, TaskState.TASK_STATE_CANCELED);
  assert.deepEqual(executor.cancelled, [record.taskId]);
  assert.deepEqual(bodies.filter((b) => b.method === 'CancelTask').map((b) => b.params.id), [record.taskId]);
  assert.equal(tasks.inFlight.size, 0);
});

test('a task that cannot be cancelled is recorded, not thrown', async () => {
  const executor = new Working(false);
  const { tasks } = await cancelWhileWorking(executor);
  assert.equal(tasks.cancels.length, 1);
  const [record] = tasks.cancels;
  assert.equal(record.ok, false);
  assert.equal(record.envelope.code, 'agent.a2a.task_not_cancelable');
  assert.deepEqual(executor.cancelled, [record.taskId]);
  executor.stop();
});
