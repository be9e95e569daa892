// agent-recovery/mcp against the real @modelcontextprotocol/sdk: its McpServer
// over streamable HTTP on 127.0.0.1 (mcp_server.mjs) and its own Client.
//
// Expected values come from outside the code under test: an `isError` result is
// `tool.mcp.tool_error`, class semantic (docs/errors.md), so `replan`; a refused
// connection is `tool.network.connection_refused`, retryable (docs/errors.md);
// the `## Errors` block for `tool.` is the committed docs/mcp-errors-block.md;
// the cancel notification is the MCP spec's (`notifications/cancelled` with the
// request's id, basic/utilities/cancellation).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import * as z from 'zod';
import { Policy, RecoveryError, VirtualClock } from '../src/index.js';
import { RecoveringClient, registerTool } from '../src/mcp.js';
import { REPO } from './helpers.mjs';
import { serveMcp } from './mcp_server.mjs';

let policy;
before(async () => {
  policy = await Policy.load();
});

const closers = [];
after(async () => {
  for (const c of closers.reverse()) await c();
});

async function connect(url) {
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(url));
  closers.push(() => client.close());
  return client;
}

/** A tools server; `started` / `aborted` settle when the `block` tool starts / sees its cancel. */
async function toolsServer() {
  const seen = {};
  seen.started = new Promise((r) => (seen.start = r));
  seen.aborted = new Promise((r) => (seen.abort = r));
  const served = await serveMcp((server) => {
    server.registerTool('add', { inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
      content: [{ type: 'text', text: String(a + b) }],
    }));
    server.registerTool('boom', {}, async () => ({ content: [{ type: 'text', text: 'kaput' }], isError: true }));
    server.registerTool('block', {}, async (extra) =>
      new Promise((resolve) => {
        seen.start();
        extra.signal.addEventListener('abort', () => {
          seen.abort();
          resolve({ content: [] });
        });
      }),
    );
  });
  closers.push(() => served.close());
  return { served, seen };
}

test('a tool call returns its result, sent once', async () => {
  const { served } = await toolsServer();
  const tools = new RecoveringClient(await connect(served.url), { policy, clock: new VirtualClock(0) });
  const result = await tools.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
  assert.equal(result.content[0].text, '5');
  assert.equal(served.find('tools/call').length, 1);
});

test('an isError result is classified and not resent', async () => {
  const { served } = await toolsServer();
  const tools = new RecoveringClient(await connect(served.url), { policy, clock: new VirtualClock(0) });
  const error = await tools.callTool({ name: 'boom', arguments: {} }).then(
    () => assert.fail('resolved'),
    (e) => e,
  );
  assert.ok(error instanceof RecoveryError, String(error));
  assert.equal(error.code, 'tool.mcp.tool_error');
  assert.equal(error.action, 'replan');
  assert.equal(error.result.isError, true);
  assert.equal(served.find('tools/call').length, 1);
});

test('aborting a call sends notifications/cancelled for its request', async () => {
  const { served, seen } = await toolsServer();
  const tools = new RecoveringClient(await connect(served.url), { policy });
  const ctl = new AbortController();
  const call = tools.callTool({ name: 'block', arguments: {} }, undefined, { signal: ctl.signal });
  await seen.started;
  ctl.abort();
  await assert.rejects(call, (e) => e.name === 'AbortError');
  await seen.aborted; // the server saw the notification and aborted the handler
  const [request] = served.find('tools/call');
  const [cancelled] = served.find('notifications/cancelled');
  assert.equal(cancelled.params.requestId, request.id);
  assert.equal(served.find('tools/call').length, 1, 'an aborted call is not retried');
});

test('a gone session is replaced once and the refused call sent again', async () => {
  const { served } = await toolsServer();
  const tools = new RecoveringClient(await connect(served.url), { policy, clock: new VirtualClock(0), reconnect: () => connect(served.url) });
  assert.equal((await tools.callTool({ name: 'add', arguments: { a: 1, b: 1 } })).content[0].text, '2');
  const old = tools.client;
  await served.forget(); // the server restarted: it no longer knows the session
  const before = served.bodies.length;
  const result = await tools.callTool({ name: 'add', arguments: { a: 2, b: 2 } });
  assert.equal(result.content[0].text, '4');
  assert.equal(tools.reconnects, 1);
  assert.notEqual(tools.client, old);
  const after = served.bodies.slice(before).map((b) => b.method);
  assert.deepEqual(after.slice(0, 2), ['tools/call', 'ping']); // refused on the old session
  assert.ok(after.includes('initialize'));
  assert.equal(after.at(-1), 'tools/call');
  assert.equal(after.filter((m) => m === 'tools/call').length, 2);
});

/** A port nothing listens on (bound, then closed). */
async function deadPort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

test('registerTool answers a tool error with the envelope and lists the ## Errors block', async () => {
  const port = await deadPort();
  const served = await serveMcp(async (server) => {
    await registerTool(server, 'orders', { description: 'Look an order up.' }, async () => {
      const res = await fetch(`http://127.0.0.1:${port}/orders/1`); // the backend is down
      return { content: [{ type: 'text', text: await res.text() }] };
    }, { policy });
    await registerTool(server, 'ping', { description: 'Answer pong.' }, async () => ({ content: [{ type: 'text', text: 'pong' }] }), { policy, codes: null });
  });
  closers.push(() => served.close());
  const client = await connect(served.url);
  const failed = await client.callTool({ name: 'orders', arguments: {} });
  assert.equal(failed.isError, true);
  const error = failed.structuredContent.error;
  assert.equal(error.code, 'tool.network.connection_refused');
  assert.equal(error.retryable, true);
  assert.ok(failed.content[0].text.includes(error.hint));
  const pong = await client.callTool({ name: 'ping', arguments: {} });
  assert.equal(pong.content[0].text, 'pong');
  const { tools } = await client.listTools();
  const block = readFileSync(join(REPO, 'docs', 'mcp-errors-block.md'), 'utf8');
  const byName = Object.fromEntries(tools.map((t) => [t.name, t.description]));
  assert.equal(byName.orders, `Look an order up.\n\n${block}`);
  assert.equal(byName.ping, 'Answer pong.');
});

test('errorsBlock is the component\'s', () => {
  const block = readFileSync(join(REPO, 'docs', 'mcp-errors-block.md'), 'utf8');
  assert.equal(policy.errorsBlock(['tool.']), block);
  assert.throws(() => policy.errorsBlock('tool.'), (e) => e.kind === 'invalid_argument');
});
