// The SDK adapters (src/sdk.js through fromError / failureOf / retry) against
// the real SDK packages (devDependencies): each client is driven against a
// local HTTP server (node:http on 127.0.0.1, port 0) that answers as the
// provider documents, or not at all, or a closed port; the MCP client and
// server talk in-process over the SDK's InMemoryTransport. No look-alike
// classes. The expected classes and actions come from the providers' docs:
//
// - OpenAI, https://platform.openai.com/docs/guides/error-codes : 401 invalid
//   authentication (fix the key), 429 rate limit (pace requests: retry),
//   429 "You exceeded your current quota" (buy credits: not retried), 500 (retry
//   after a brief wait), 503 slow down (retry); APIConnectionError /
//   APITimeoutError are retried by the SDK itself (openai-node README, "Retries").
// - Anthropic, https://docs.anthropic.com/en/api/errors : 400
//   invalid_request_error, 401 authentication_error, 429 rate_limit_error (with
//   retry-after), 500 api_error, 529 overloaded_error; the SDK retries
//   connection errors, 408, 409, 429 and >= 500 (anthropic-sdk-typescript README).
// - MCP, specification 2025-06-18, server/tools "Error Handling": unknown tools
//   and invalid arguments are JSON-RPC errors (-32602); tool execution errors
//   are results with `isError: true`. -32001 is the SDK's own request timeout
//   (ErrorCode.RequestTimeout in sdk/types.ts).
// - A2A, specification "JSON-RPC error codes" (-32001 TaskNotFoundError) and
//   TaskState (a2a.proto: TASK_STATE_FAILED, TASK_STATE_INPUT_REQUIRED).

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server as McpServer } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  UrlElicitationRequiredError,
} from '@modelcontextprotocol/sdk/types.js';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { Policy, RecoveryError, failureOf, fromError, retry } from '../src/index.js';
import { closedPort, fakeSleep, thrown } from './helpers.mjs';

let policy;
const servers = [];
before(async () => {
  policy = await Policy.load();
});
after(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/**
 * A local server: `handler(req, res, body)` per request; a handler that never
 * answers leaves the request hanging until the test run closes the server.
 */
async function serve(handler) {
  const requests = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      handler(req, res, body, requests.length);
    });
  });
  servers.push(server);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, requests };
}

function json(res, status, body, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

const CHAT = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
const MESSAGE = { model: 'claude-sonnet-5-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] };
const COMPLETION = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'gpt-4o-mini',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }],
};

function openai(url, options = {}) {
  return new OpenAI({ apiKey: 'sk-test', baseURL: `${url}/v1`, maxRetries: 0, ...options });
}

function anthropic(url, options = {}) {
  return new Anthropic({ apiKey: 'sk-ant-test', baseURL: url, maxRetries: 0, ...options });
}

/** classify + decide at attempt 1, as retry() would. */
function judge(obs, ctx = {}) {
  return { env: policy.classify(obs), decision: policy.decide(obs, { attempt: 1, seed: 7n, ...ctx }) };
}

// ---------------------------------------------------------------- OpenAI

test('openai: the SDK timeout (APIConnectionTimeoutError) is a timeout, retried at attempt 1', async () => {
  const { url } = await serve(() => {}); // never answers
  const err = await thrown(openai(url, { timeout: 100 }).chat.completions.create(CHAT));
  assert.equal(err.constructor.name, 'APIConnectionTimeoutError');
  assert.ok(err instanceof OpenAI.APIConnectionTimeoutError);
  const obs = fromError(err);
  assert.deepEqual(obs, { source: 'timeout', phase: 'total', provider: 'openai' });
  const { env, decision } = judge(obs);
  assert.equal(env.code, 'llm.timeout.total');
  assert.equal(env.class, 'transient');
  assert.equal(env.retryable, true);
  assert.equal(decision.action, 'retry');
});

test('openai: a closed port is a refused connection, read from the cause chain', async () => {
  const err = await thrown(openai(await closedPort()).chat.completions.create(CHAT));
  assert.ok(err instanceof OpenAI.APIConnectionError);
  const obs = fromError(err);
  assert.equal(obs.source, 'network');
  assert.equal(obs.code, 'ECONNREFUSED');
  assert.equal(obs.provider, 'openai');
  const { env, decision } = judge(obs);
  assert.equal(env.code, 'llm.network.connection_refused');
  assert.equal(env.retryable, true);
  assert.equal(decision.action, 'retry');
});

test('openai: a connection the server drops mid-request is a reset, read from the cause chain', async () => {
  const { url } = await serve((req) => req.socket.destroy());
  const err = await thrown(openai(url).chat.completions.create(CHAT));
  assert.ok(err instanceof OpenAI.APIConnectionError);
  const obs = fromError(err);
  assert.equal(obs.source, 'network');
  assert.equal(obs.code, 'UND_ERR_SOCKET'); // undici's SocketError "other side closed", the cause of "fetch failed"
  const { env } = judge(obs);
  assert.equal(env.code, 'llm.network.connection_reset');
  assert.equal(env.class, 'transient');
});

test('openai: 429 rate limit with retry-after is retried after the hint', async () => {
  const body = {
    error: {
      message: 'Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3, Used 3.',
      type: 'requests',
      param: null,
      code: 'rate_limit_exceeded',
    },
  };
  const { url } = await serve((_q, res) => json(res, 429, body, { 'retry-after': '2', 'x-request-id': 'req_1' }));
  const err = await thrown(openai(url).chat.completions.create(CHAT));
  assert.ok(err instanceof OpenAI.RateLimitError);
  const obs = fromError(err);
  assert.equal(obs.source, 'http');
  assert.equal(obs.status, 429);
  assert.equal(obs.provider, 'openai');
  assert.equal(obs.headers['retry-after'], '2'); // a fetch Headers object, read into a plain one
  assert.deepEqual(obs.body, body);
  const { env, decision } = judge(obs);
  assert.equal(env.code, 'llm.http.429_rate_limited');
  assert.equal(env.class, 'transient');
  assert.equal(env.retryable, true);
  assert.equal(decision.action, 'retry');
  assert.ok(decision.delay_ms >= 2000, `retry-after: 2 means at least 2000 ms, got ${decision.delay_ms}`);
});

test('openai: 429 insufficient_quota is a quota, never retried', async () => {
  const body = {
    error: {
      message: 'You exceeded your current quota, please check your plan and billing details.',
      type: 'insufficient_quota',
      param: null,
      code: 'insufficient_quota',
    },
  };
  const { url } = await serve((_q, res) => json(res, 429, body));
  const err = await thrown(openai(url).chat.completions.create(CHAT));
  assert.ok(err instanceof OpenAI.RateLimitError); // the SDK's class says rate limit; the body says quota
  const { env, decision } = judge(fromError(err));
  assert.equal(env.code, 'llm.quota.exhausted');
  assert.equal(env.category, 'quota');
  assert.equal(env.retryable, false);
  assert.notEqual(decision.action, 'retry');
});

test('openai: 500 is retried, 400 and 401 are not', async () => {
  const bodies = {
    500: {
      error: {
        message: 'The server had an error while processing your request.',
        type: 'server_error',
        param: null,
        code: null,
      },
    },
    400: {
      error: {
        message: "Invalid value for 'temperature'.",
        type: 'invalid_request_error',
        param: 'temperature',
        code: 'invalid_value',
      },
    },
    401: {
      error: {
        message: 'Incorrect API key provided: sk-test.',
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_api_key',
      },
    },
  };
  const { url } = await serve((req, res) => {
    const status = Number(req.url.split('/')[1]);
    json(res, status, bodies[status]);
  });
  const errs = {};
  for (const status of Object.keys(bodies)) {
    errs[status] = await thrown(openai(`${url}/${status}`).chat.completions.create(CHAT));
  }
  assert.ok(errs['500'] instanceof OpenAI.InternalServerError);
  assert.ok(errs['400'] instanceof OpenAI.BadRequestError);
  assert.ok(errs['401'] instanceof OpenAI.AuthenticationError);
  const r500 = judge(fromError(errs['500']));
  assert.equal(r500.env.code, 'llm.http.500_internal_error');
  assert.equal(r500.env.class, 'transient');
  assert.equal(r500.decision.action, 'retry');
  const r400 = judge(fromError(errs['400']));
  assert.equal(r400.env.class, 'permanent');
  assert.equal(r400.env.retryable, false);
  assert.equal(r400.env.field, 'temperature');
  assert.equal(r400.decision.action, 'fail');
  const r401 = judge(fromError(errs['401']));
  assert.equal(r401.env.category, 'auth');
  assert.equal(r401.env.retryable, false);
  assert.notEqual(r401.decision.action, 'retry');
});

test('openai through retry(timeoutMs): the aborted attempt is a timeout, retried, and the next one succeeds', async () => {
  const { url, requests } = await serve((_q, res, _b, n) => {
    if (n >= 2) json(res, 200, COMPLETION); // the first request never answers
  });
  const client = openai(url);
  const { sleep, delays } = fakeSleep();
  const decisions = [];
  const out = await retry(({ signal }) => client.chat.completions.create(CHAT, { signal }), {
    policy,
    call: 'llm',
    idempotent: true,
    timeoutMs: 500,
    seed: 3n,
    sleep,
    onDecision: (d) => decisions.push(d),
  });
  assert.equal(out.choices[0].message.content, 'hello');
  assert.equal(requests.length, 2);
  assert.equal(decisions.length, 1);
  const [d] = decisions;
  assert.ok(d.error instanceof OpenAI.APIUserAbortError, `got ${d.error?.constructor?.name}`);
  assert.deepEqual(d.observation, {
    source: 'timeout',
    phase: 'total',
    after_ms: 500,
    provider: 'openai',
    call: 'llm',
  });
  assert.equal(d.decision.envelope.code, 'llm.timeout.total');
  assert.equal(d.decision.action, 'retry');
  assert.deepEqual(delays, [d.decision.delay_ms]);
});

test('openai: a call the caller cancels is a cancellation, not retried', async () => {
  const ctl = new AbortController();
  const { url } = await serve(() => ctl.abort()); // cancel once the request is in
  const err = await thrown(openai(url).chat.completions.create(CHAT, { signal: ctl.signal }));
  assert.ok(err instanceof OpenAI.APIUserAbortError);
  const obs = fromError(err);
  assert.equal(obs.source, 'exception');
  assert.equal(obs.type, 'AbortError');
  const { env, decision } = judge(obs);
  assert.equal(env.code, 'llm.exception.cancelled');
  assert.equal(env.category, 'cancelled');
  assert.notEqual(decision.action, 'retry');
});

// ---------------------------------------------------------------- Anthropic

test('anthropic: the SDK timeout is a timeout, retried at attempt 1', async () => {
  const { url } = await serve(() => {});
  const err = await thrown(anthropic(url, { timeout: 100 }).messages.create(MESSAGE));
  assert.equal(err.name, 'APIConnectionTimeoutError');
  assert.ok(err instanceof Anthropic.APIConnectionTimeoutError);
  const obs = fromError(err);
  assert.deepEqual(obs, { source: 'timeout', phase: 'total', provider: 'anthropic' });
  const { env, decision } = judge(obs);
  assert.equal(env.code, 'llm.timeout.total');
  assert.equal(env.retryable, true);
  assert.equal(decision.action, 'retry');
});

test('anthropic: 529 overloaded_error and 429 rate_limit_error are retried, 400 and 401 are not', async () => {
  const answers = {
    529: [{ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }, {}],
    429: [
      {
        type: 'error',
        error: {
          type: 'rate_limit_error',
          message: 'Number of request tokens has exceeded your per-minute rate limit',
        },
      },
      { 'retry-after': '3' },
    ],
    500: [{ type: 'error', error: { type: 'api_error', message: 'Internal server error' } }, {}],
    400: [{ type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: Field required' } }, {}],
    401: [{ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }, {}],
  };
  const { url } = await serve((req, res) => {
    const status = Number(req.url.split('/')[1]);
    json(res, status, answers[status][0], { 'request-id': `req_${status}`, ...answers[status][1] });
  });
  const results = {};
  for (const status of Object.keys(answers)) {
    const err = await thrown(anthropic(`${url}/${status}`).messages.create(MESSAGE));
    assert.equal(err.status, Number(status));
    const obs = fromError(err);
    assert.equal(obs.source, 'http');
    assert.equal(obs.provider, 'anthropic');
    assert.deepEqual(obs.body, answers[status][0]); // Anthropic's SDK keeps the whole body
    results[status] = { err, ...judge(obs) };
  }
  assert.equal(results[529].err.name, 'OverloadedError');
  assert.equal(results[529].env.code, 'llm.http.529_overloaded');
  assert.equal(results[529].env.class, 'transient');
  assert.equal(results[529].decision.action, 'retry');
  assert.equal(results[429].env.code, 'llm.http.429_rate_limited');
  assert.equal(results[429].decision.action, 'retry');
  assert.ok(results[429].decision.delay_ms >= 3000, `retry-after: 3, got ${results[429].decision.delay_ms}`);
  assert.equal(results[500].env.class, 'transient');
  assert.equal(results[500].decision.action, 'retry');
  assert.equal(results[400].env.class, 'permanent');
  assert.equal(results[400].decision.action, 'fail');
  assert.equal(results[401].env.category, 'auth');
  assert.notEqual(results[401].decision.action, 'retry');
});

test('anthropic through retry(timeoutMs): APIUserAbortError without a cause is still our timeout', async () => {
  const ok = {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: MESSAGE.model,
    content: [{ type: 'text', text: 'hello' }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 },
  };
  const { url } = await serve((_q, res, _b, n) => {
    if (n >= 2) json(res, 200, ok);
  });
  const client = anthropic(url);
  const { sleep } = fakeSleep();
  const decisions = [];
  const out = await retry(({ signal }) => client.messages.create(MESSAGE, { signal }), {
    policy,
    idempotent: true,
    timeoutMs: 500,
    sleep,
    onDecision: (d) => decisions.push(d),
  });
  assert.equal(out.content[0].text, 'hello');
  assert.equal(decisions.length, 1);
  assert.equal(decisions[0].error.name, 'APIUserAbortError');
  assert.equal(decisions[0].error.cause, undefined); // nothing in the error says why it was aborted
  assert.deepEqual(decisions[0].observation, {
    source: 'timeout',
    phase: 'total',
    after_ms: 500,
    provider: 'anthropic',
  });
  assert.equal(decisions[0].decision.envelope.code, 'llm.timeout.total');
});

test('anthropic: a closed port is a refused connection', async () => {
  const err = await thrown(anthropic(await closedPort()).messages.create(MESSAGE));
  assert.equal(err.name, 'APIConnectionError');
  const obs = fromError(err);
  assert.equal(obs.code, 'ECONNREFUSED');
  assert.equal(judge(obs).env.code, 'llm.network.connection_refused');
});

// ---------------------------------------------------------------- MCP

async function mcpPair() {
  const server = new McpServer({ name: 'calc', version: '1.0.0' }, { capabilities: { tools: {} } });
  let hang;
  const hung = new Promise((resolve) => {
    hang = resolve;
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: 'divide',
        inputSchema: {
          type: 'object',
          properties: { a: { type: 'number' }, b: { type: 'number' } },
          required: ['a', 'b'],
        },
      },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const { name, arguments: args = {} } = req.params;
    if (name === 'slow') return hung;
    if (name === 'pay') {
      // MCP 2025-11-25, elicitation in URL mode: the user must complete a step in a browser.
      throw new UrlElicitationRequiredError([
        { mode: 'url', elicitationId: 'e-1', url: 'https://pay.example/checkout/1', message: 'Approve the payment' },
      ]);
    }
    if (name !== 'divide') throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    if (typeof args.a !== 'number' || typeof args.b !== 'number') {
      throw new McpError(ErrorCode.InvalidParams, 'Invalid arguments: a and b must be numbers', {
        field: typeof args.a !== 'number' ? 'a' : 'b',
      });
    }
    if (args.b === 0) return { content: [{ type: 'text', text: 'division by zero' }], isError: true };
    return { content: [{ type: 'text', text: String(args.a / args.b) }] };
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new McpClient({ name: 'test', version: '1.0.0' });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  return {
    client,
    close: async () => {
      hang({ content: [] });
      await client.close();
      await server.close();
    },
  };
}

test('mcp: a tool result with isError: true is a tool error; success is no failure', async () => {
  const { client, close } = await mcpPair();
  try {
    assert.equal(await failureOf(await client.callTool({ name: 'divide', arguments: { a: 6, b: 3 } })), undefined);
    const result = await client.callTool({ name: 'divide', arguments: { a: 1, b: 0 } });
    assert.equal(result.isError, true);
    const obs = await failureOf(result);
    assert.deepEqual(obs, { source: 'mcp', message: { jsonrpc: '2.0', id: null, result } });
    const env = policy.classify(obs);
    assert.equal(env.code, 'tool.mcp.tool_error');
    assert.equal(env.message, 'division by zero');
  } finally {
    await close();
  }
});

test('mcp: invalid params is McpError -32602, read as the JSON-RPC error it was', async () => {
  const { client, close } = await mcpPair();
  try {
    const err = await thrown(client.callTool({ name: 'divide', arguments: { a: 'six', b: 3 } }));
    assert.ok(err instanceof McpError);
    assert.equal(err.code, -32602);
    // The server SDK sends its McpError's message (already "MCP error -32602: ...")
    // and the client SDK prefixes it again; the observation has the wire message.
    assert.equal(err.message, 'MCP error -32602: MCP error -32602: Invalid arguments: a and b must be numbers');
    const obs = fromError(err);
    assert.deepEqual(obs, {
      source: 'mcp',
      message: {
        jsonrpc: '2.0',
        id: null,
        error: {
          code: -32602,
          message: 'MCP error -32602: Invalid arguments: a and b must be numbers',
          data: { field: 'a' },
        },
      },
    });
    const { env, decision } = judge(obs, { call: 'tool' });
    // Invalid arguments are never retried as they are (MCP spec: a protocol error the
    // caller must fix); whether the class is permanent or semantic (re-plan) is the policy's.
    assert.equal(env.upstream.source, 'mcp');
    assert.equal(env.retryable, false);
    assert.ok(['permanent', 'semantic'].includes(env.class), env.class);
    assert.notEqual(decision.action, 'retry');
  } finally {
    await close();
  }
});

test('mcp: the client-side request timeout (McpError -32001) is retried', async () => {
  const { client, close } = await mcpPair();
  try {
    const err = await thrown(client.callTool({ name: 'slow', arguments: {} }, undefined, { timeout: 50 }));
    assert.ok(err instanceof McpError);
    assert.equal(err.code, ErrorCode.RequestTimeout);
    const obs = fromError(err);
    assert.equal(obs.message.error.code, -32001);
    const { env, decision } = judge(obs, { call: 'tool' });
    assert.equal(env.code, 'tool.mcp.request_timeout');
    assert.equal(env.retryable, true);
    assert.equal(decision.action, 'retry');
  } finally {
    await close();
  }
});

test('mcp: URL elicitation required (-32042) waits for the user; a closed connection (-32000) is retried', async () => {
  const { client, close } = await mcpPair();
  try {
    const err = await thrown(client.callTool({ name: 'pay', arguments: {} }));
    assert.ok(err instanceof UrlElicitationRequiredError);
    const obs = fromError(err);
    assert.equal(obs.message.error.code, -32042);
    assert.equal(obs.message.error.data.elicitations[0].url, 'https://pay.example/checkout/1');
    const { env, decision } = judge(obs, { call: 'tool' });
    assert.equal(env.code, 'tool.mcp.url_elicitation_required');
    assert.equal(decision.action, 'await_input');

    const pending = thrown(client.callTool({ name: 'slow', arguments: {} }));
    await client.close(); // the transport closes under the request
    const closed = await pending;
    assert.ok(closed instanceof McpError);
    assert.equal(closed.code, ErrorCode.ConnectionClosed);
    const c = judge(fromError(closed), { call: 'tool' });
    assert.equal(c.env.code, 'tool.mcp.connection_closed');
    assert.equal(c.env.retryable, true);
  } finally {
    await close();
  }
});

test('mcp through retry(): an isError result stops as a tool error, with the result kept', async () => {
  const { client, close } = await mcpPair();
  try {
    const e = await thrown(
      retry(() => client.callTool({ name: 'divide', arguments: { a: 1, b: 0 } }), {
        policy,
        call: 'tool',
        sleep: fakeSleep().sleep,
      }),
    );
    assert.ok(e instanceof RecoveryError);
    assert.equal(e.code, 'tool.mcp.tool_error');
    assert.equal(e.result.isError, true);
  } finally {
    await close();
  }
});

// ---------------------------------------------------------------- A2A

/** A JSON-RPC A2A agent (v1.0 method names): GetTask -> -32001, SendMessage -> a task in `state`. */
async function a2aAgent(state) {
  const { url, requests } = await serve((req, res, body) => {
    if (req.method === 'GET') {
      return json(res, 200, {
        name: 'test agent',
        description: 'answers with failures',
        version: '1.0.0',
        supportedInterfaces: [
          { url: `http://${req.headers.host}/rpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        ],
        capabilities: {},
        defaultInputModes: ['text'],
        defaultOutputModes: ['text'],
        skills: [],
      });
    }
    const rpc = JSON.parse(body);
    if (rpc.method === 'GetTask') {
      return json(res, 200, { jsonrpc: '2.0', id: rpc.id, error: { code: -32001, message: 'Task not found: t-404' } });
    }
    return json(res, 200, {
      jsonrpc: '2.0',
      id: rpc.id,
      result: {
        task: {
          id: 't-1',
          contextId: 'c-1',
          status: {
            state,
            message: {
              messageId: 'm-1',
              role: 'ROLE_AGENT',
              parts: [{ text: 'the upstream service refused the order' }],
            },
          },
        },
      },
    });
  });
  return { url, requests };
}

test('a2a: TaskNotFoundError from the real client is the A2A error -32001', async () => {
  const { url } = await a2aAgent('TASK_STATE_FAILED');
  const client = await new ClientFactory().createFromUrl(url);
  const err = await thrown(client.getTask({ id: 't-404' }));
  assert.equal(err.name, 'TaskNotFoundError');
  const obs = fromError(err);
  assert.equal(obs.source, 'a2a');
  assert.equal(obs.message.error.code, -32001);
  const env = policy.classify(obs);
  assert.equal(env.code, 'agent.a2a.task_not_found');
  assert.equal(env.retryable, false);
});

test('a2a: a failed task and an input-required task returned by the client', async () => {
  const failed = await a2aAgent('TASK_STATE_FAILED');
  const client = await new ClientFactory().createFromUrl(failed.url);
  const message = { messageId: 'm-0', role: 1, parts: [{ content: { $case: 'text', value: 'order 3 pizzas' } }] };
  const result = await client.sendMessage({ message });
  const obs = await failureOf(result);
  assert.equal(obs.source, 'a2a');
  assert.equal(obs.message.result.status.state, 'TASK_STATE_FAILED');
  const env = policy.classify(obs);
  assert.equal(env.code, 'agent.task.failed');
  assert.equal(env.message, 'the upstream service refused the order');

  const waiting = await a2aAgent('TASK_STATE_INPUT_REQUIRED');
  const c2 = await new ClientFactory().createFromUrl(waiting.url);
  const { env: env2, decision } = judge(await failureOf(await c2.sendMessage({ message })));
  assert.equal(env2.code, 'agent.task.input_required');
  assert.equal(decision.action, 'await_input');

  const done = await a2aAgent('TASK_STATE_COMPLETED');
  const c3 = await new ClientFactory().createFromUrl(done.url);
  assert.equal(await failureOf(await c3.sendMessage({ message })), undefined);
});

test('anthropic: a per-error-code class keeps its status and the details the policy reads', async () => {
  const body = {
    type: 'error',
    error: {
      type: 'rate_limit_error',
      message: 'Contract spend limit reached.',
      details: { error_code: 'contract_spend_limit_reached' },
    },
  };
  const { url } = await serve((_q, res) => json(res, 429, body));
  const err = await thrown(anthropic(url).messages.create(MESSAGE));
  assert.equal(err.name, 'ContractSpendLimitReachedError'); // @anthropic-ai/sdk core/error-classes.js
  assert.equal(err.errorCode, 'contract_spend_limit_reached');
  const obs = fromError(err);
  assert.equal(obs.status, 429);
  assert.deepEqual(obs.body, body);
});

/** A 200 event stream that sends `events` (SSE text) and ends. */
function sse(res, events) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': 'req_stream' });
  res.end(events);
}

async function drain(stream) {
  for await (const _ of stream);
}

test('mid-stream errors: an error event in a 200 stream is read from its body', async () => {
  // OpenAI chat streams send an error as a `data: {"error": ...}` chunk.
  const openaiError = {
    message: 'The server had an error while processing your request.',
    type: 'server_error',
    param: null,
    code: null,
  };
  const o = await serve((_q, res) => sse(res, `data: ${JSON.stringify({ error: openaiError })}\n\n`));
  const stream = await openai(o.url).chat.completions.create({ ...CHAT, stream: true });
  const oerr = await thrown(drain(stream));
  assert.equal(oerr.constructor.name, 'APIError');
  assert.equal(oerr.status, undefined);
  const oobs = fromError(oerr);
  assert.equal(oobs.status, 200);
  assert.equal(oobs.headers['x-request-id'], 'req_stream');
  assert.deepEqual(oobs.body, { error: openaiError });
  const oj = judge(oobs);
  assert.equal(oj.env.code, 'llm.http.500_internal_error');
  assert.equal(oj.decision.action, 'retry');

  // Anthropic's documented stream error: `event: error` with overloaded_error.
  const anthropicError = { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } };
  const a = await serve((_q, res) => sse(res, `event: error\ndata: ${JSON.stringify(anthropicError)}\n\n`));
  const astream = await anthropic(a.url).messages.create({ ...MESSAGE, stream: true });
  const aerr = await thrown(drain(astream));
  assert.equal(aerr.name, 'APIError');
  const aobs = fromError(aerr);
  assert.deepEqual([aobs.source, aobs.status, aobs.provider], ['http', 200, 'anthropic']);
  assert.deepEqual(aobs.body, anthropicError);
  const aj = judge(aobs);
  assert.equal(aj.env.code, 'llm.http.529_overloaded');
  assert.equal(aj.decision.action, 'retry');
});

// ---------------------------------------------------------------- plain fetch and hostile input

test('fetch (undici): a closed port, our own timeout and a class name without `name`', async () => {
  const refused = await thrown(fetch(await closedPort()));
  assert.equal(refused.message, 'fetch failed'); // TypeError; the code is in its cause
  assert.deepEqual(fromError(refused), { source: 'network', code: 'ECONNREFUSED', message: 'fetch failed' });

  const { url } = await serve(() => {});
  const timedOut = await thrown(fetch(url, { signal: AbortSignal.timeout(100) }));
  assert.equal(timedOut.name, 'TimeoutError');
  assert.deepEqual(fromError(timedOut, { timeoutMs: 100 }), { source: 'timeout', phase: 'total', after_ms: 100 });
  // Wrapped by a library that kept it as the cause.
  const wrapped = new Error('tool failed', { cause: timedOut });
  assert.deepEqual(fromError(wrapped), { source: 'timeout', phase: 'total' });

  class ToolCrashed extends Error {}
  assert.deepEqual(fromError(new ToolCrashed('boom')), { source: 'exception', type: 'ToolCrashed', message: 'boom' });
});

test('hostile errors never throw: throwing getters, cause cycles, revoked proxies, non-errors', () => {
  const getter = {};
  Object.defineProperty(getter, 'name', {
    get() {
      throw new Error('no');
    },
  });
  assert.equal(fromError(getter).source, 'exception');
  const a = new Error('a');
  const b = new Error('b', { cause: a });
  a.cause = b;
  // the cause is read once; the cycle back to `a` is cut
  assert.deepEqual(fromError(a), {
    source: 'exception',
    type: 'Error',
    message: 'a',
    cause: { source: 'exception', type: 'Error', message: 'b' },
  });
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  assert.deepEqual(fromError(proxy, { call: 'tool' }), { source: 'exception', type: 'Error', call: 'tool' });
  for (const v of [null, undefined, 42, Symbol('s'), () => 1]) assert.equal(fromError(v).source, 'exception');
  // An SDK-named error whose fields are garbage still yields an observation the policy accepts.
  const odd = Object.assign(new McpError(-32603, 'x'), { code: 'not a number' });
  const oddObs = fromError(odd);
  assert.deepEqual([oddObs.source, oddObs.type], ['exception', 'McpError']);
  assert.equal(policy.classify(oddObs).code, 'tool.exception.unhandled');
});

test('a2a over HTTP+JSON (REST): a known error by its ErrorInfo reason, an unknown one by its status', async () => {
  const { url, requests } = await serve((req, res) => {
    const host = `http://${req.headers.host}`;
    if (req.url.endsWith('agent-card.json')) {
      return json(res, 200, {
        name: 'rest agent',
        description: 'answers with failures',
        version: '1.0.0',
        supportedInterfaces: [{ url: `${host}/a2a`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' }],
        capabilities: {},
        defaultInputModes: ['text'],
        defaultOutputModes: ['text'],
        skills: [],
      });
    }
    if (req.url.includes('t-404')) {
      // google.rpc.Status with an ErrorInfo, as the A2A HTTP+JSON binding specifies.
      return json(res, 404, {
        error: {
          code: 404,
          status: 'NOT_FOUND',
          message: 'Task not found: t-404',
          details: [
            {
              '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
              reason: 'TASK_NOT_FOUND',
              domain: 'a2a-protocol.org',
            },
          ],
        },
      });
    }
    res.writeHead(503, { 'retry-after': '4' });
    res.end();
  });
  const client = await new ClientFactory().createFromUrl(url);
  const notFound = await thrown(client.getTask({ id: 't-404' }));
  assert.equal(notFound.name, 'TaskNotFoundError');
  assert.equal(notFound.transport, 'rest');
  const nf = fromError(notFound);
  assert.deepEqual([nf.source, nf.message.error.code], ['a2a', -32001]);
  assert.equal(policy.classify(nf).code, 'agent.a2a.task_not_found');

  const busy = await thrown(client.getTask({ id: 't-busy' }));
  assert.equal(busy.name, 'A2AError');
  assert.equal(busy.statusCode, 503);
  const b = fromError(busy);
  assert.deepEqual([b.source, b.status, b.provider, b.headers['retry-after']], ['http', 503, 'a2a', '4']);
  assert.equal(b.call, 'agent');
  const { env, decision } = judge(b);
  assert.equal(env.code, 'agent.http.503_unavailable');
  assert.equal(decision.action, 'retry');
  assert.ok(decision.delay_ms >= 4000, `retry-after: 4, got ${decision.delay_ms}`);
  assert.ok(
    requests.some((r) => r.url.startsWith('/a2a/')),
    requests.map((r) => r.url).join(' '),
  );
});

test('a2a: a v0.3 agent through the SDK compat layer: its input-required task asks for input', async () => {
  const { url, requests } = await serve((req, res, body) => {
    if (req.method === 'GET') {
      return json(res, 200, {
        name: 'v0.3 agent',
        description: 'an agent still on A2A v0.3',
        version: '1.0.0',
        protocolVersion: '0.3.0',
        url: `http://${req.headers.host}/rpc`,
        preferredTransport: 'JSONRPC',
        capabilities: {},
        defaultInputModes: ['text'],
        defaultOutputModes: ['text'],
        skills: [],
      });
    }
    const rpc = JSON.parse(body);
    const message = {
      kind: 'message',
      messageId: 'm-1',
      role: 'agent',
      parts: [{ kind: 'text', text: 'Which size: small or large?' }],
    };
    return json(res, 200, {
      jsonrpc: '2.0',
      id: rpc.id,
      result: { kind: 'task', id: 't-1', contextId: 'c-1', status: { state: 'input-required', message } },
    });
  });
  const legacy = { legacyCompat: { enabled: true } };
  const factory = new ClientFactory({
    transports: [new JsonRpcTransportFactory(legacy)],
    cardResolver: new DefaultAgentCardResolver(legacy),
  });
  const client = await factory.createFromUrl(url);
  const task = await client.sendMessage({
    message: { messageId: 'm-0', role: 1, parts: [{ content: { $case: 'text', value: 'order a pizza' } }] },
  });
  assert.equal(JSON.parse(requests.at(-1).body).method, 'message/send'); // the v0.3 method name on the wire
  assert.equal(task.status.state, 6); // the SDK's numeric TaskState
  const obs = await failureOf(task);
  assert.equal(obs.message.result.status.state, 'TASK_STATE_INPUT_REQUIRED');
  const { env, decision } = judge(obs);
  assert.equal(env.code, 'agent.task.input_required');
  assert.equal(env.message, 'Which size: small or large?');
  assert.equal(decision.action, 'await_input');
});

test('class names: the SDK classes as their prototype chains name them', async () => {
  const { url } = await serve(() => {});
  const err = await thrown(openai(url, { timeout: 50 }).chat.completions.create(CHAT));
  assert.equal(err.name, 'Error'); // what `err.name` alone says: the class names are read instead
  const { classNames } = await import('../src/sdk.js');
  assert.deepEqual(classNames(err), [
    'APIConnectionTimeoutError',
    'APIConnectionError',
    'APIError',
    'OpenAIError',
    'Error',
  ]);
  const mcp = new McpError(-32000, 'Connection closed');
  assert.deepEqual(classNames(mcp), ['McpError', 'Error']);
  const a2a = await thrown(
    (await new ClientFactory().createFromUrl((await a2aAgent('TASK_STATE_FAILED')).url)).getTask({ id: 't-404' }),
  );
  // The bundler renamed the A2A base class `_A2AError`: why the SDK brands its
  // errors with Symbol.for('@a2a-js/sdk.A2AError'), and why the adapter reads that brand.
  assert.deepEqual(classNames(a2a), ['TaskNotFoundError', 'JsonRpcTaskNotFoundError', '_A2AError', 'Error']);
});

test('openai: a body whose `error` is a string (a minimal tool error) keeps its shape', async () => {
  const { url } = await serve((_q, res) => json(res, 429, { error: 'rate_limit', retry_after: 7 }));
  const err = await thrown(openai(url).chat.completions.create(CHAT));
  assert.equal(err.error, 'rate_limit'); // the SDK keeps only the `error` member
  const obs = fromError(err);
  assert.deepEqual(obs.body, { error: 'rate_limit' });
  assert.equal(judge(obs).env.code, 'llm.http.429_rate_limited');
});
