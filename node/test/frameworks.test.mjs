// fromError on what agent frameworks throw, made by the real packages: the
// Vercel AI SDK (`ai` with `@ai-sdk/openai`), the OpenAI and Anthropic SDKs, all
// driven against a local HTTP server (node:http on 127.0.0.1, port 0). The
// `exception` observation must carry the status, headers and body exactly as
// the server sent them, the framework's own retry verdict (`isRetryable`), and
// the observations of the `cause` and of the `errors` (RetryError,
// AggregateError). Expected values are what the server sent.
//
// Sources: @ai-sdk/provider src/errors/api-call-error.ts (APICallError:
// statusCode, responseHeaders, responseBody, isRetryable = 408, 409, 429 or >=
// 500); ai src/util/retry-error.ts (RetryError: reason, errors, lastError) and
// src/util/retry-with-exponential-backoff.ts (retry-after-ms / retry-after
// honoured under 60 s); the bodies are the providers' documented errors
// (https://platform.openai.com/docs/guides/error-codes: 429 insufficient_quota;
// https://docs.anthropic.com/en/api/errors: 529 overloaded_error).

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { closedPort, thrown } from './helpers.mjs';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { APICallError, RetryError, generateText } from 'ai';
import { Policy, fromError } from '../src/index.js';

const QUOTA = {
  error: {
    message: 'You exceeded your current quota, please check your plan and billing details.',
    type: 'insufficient_quota',
    param: null,
    code: 'insufficient_quota',
  },
};
const OVERLOADED_503 = { error: { message: 'The engine is currently overloaded, please try again later', type: 'server_error', param: null, code: null } };
const OVERLOADED_529 = { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } };
const BAD_REQUEST = { error: { message: "Invalid value for 'model'", type: 'invalid_request_error', param: 'model', code: null } };

// The verdicts the providers' docs imply: "insufficient_quota: You exceeded your
// current quota ... buy more credits" is not retried (class policy), whatever
// the framework's isRetryable says; a rate limit, a 503 and a 529 overload are
// retried after the server's Retry-After.
const QUOTA_VERDICT = ['llm.quota.exhausted', 'policy', false];

let policy;
before(async () => {
  policy = await Policy.load();
});

function verdict(obs) {
  const env = policy.classify(obs);
  return [env.code, env.class, env.retryable];
}

function waitMs(obs) {
  const d = policy.decide(obs, { attempt: 1, seed: 7n });
  return [d.action, d.delay_ms];
}

const servers = [];
after(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A local server answering the scripted replies in turn (the last one repeats). */
async function serve(...replies) {
  let n = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const [status, body, headers = {}] = replies[Math.min(n++, replies.length - 1)];
      const text = typeof body === 'string' ? body : JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(text);
    });
  });
  servers.push(server);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, count: () => n };
}

function aiModel(url) {
  return createOpenAI({ baseURL: `${url}/v1`, apiKey: 'sk-test' }).chat('gpt-4o-mini');
}

/** The observation carries the response as sent: status, these headers (names lower-case), the body. */
function assertSent(obs, status, headers, body) {
  assert.equal(obs.status, status);
  for (const [k, v] of Object.entries(headers)) assert.equal(obs.headers[k], v);
  for (const [k, v] of Object.entries(obs.headers)) {
    assert.equal(k, k.toLowerCase());
    assert.equal(typeof v, 'string');
  }
  assert.deepEqual(obs.body, body);
}

// ---------------------------------------------------------------- Vercel AI SDK

test('ai: an APICallError keeps status, Retry-After, the quota body and the SDK verdict', async () => {
  const headers = { 'retry-after': '2', 'x-request-id': 'req_quota' };
  const { url } = await serve([429, QUOTA, headers]);
  const err = await thrown(generateText({ model: aiModel(url), prompt: 'hi', maxRetries: 0 }));
  assert.ok(APICallError.isInstance(err));
  const obs = fromError(err, { call: 'llm' });
  assert.equal(obs.source, 'exception');
  assert.equal(obs.type, 'AI_APICallError');
  assert.equal(obs.call, 'llm');
  assertSent(obs, 429, headers, QUOTA);
  assert.equal(obs.retryable, true); // the AI SDK's own verdict for any 429
  assert.equal(obs.message, err.message);
  assert.deepEqual(verdict(obs), QUOTA_VERDICT);
});

test('ai: a rate-limited APICallError waits what Retry-After says', async () => {
  const rateLimit = { error: { message: 'Rate limit reached for gpt-4o-mini', type: 'requests', param: null, code: 'rate_limit_exceeded' } };
  const { url } = await serve([429, rateLimit, { 'retry-after': '2' }]);
  const obs = fromError(await thrown(generateText({ model: aiModel(url), prompt: 'hi', maxRetries: 0 })), { call: 'llm' });
  assertSent(obs, 429, { 'retry-after': '2' }, rateLimit);
  assert.deepEqual(verdict(obs).slice(1), ['transient', true]);
  assert.deepEqual(waitMs(obs), ['retry', 2000]);
});

test('ai: a RetryError lists every attempt (maxRetriesExceeded)', async () => {
  const headers = { 'retry-after-ms': '1' };
  const server = await serve([503, OVERLOADED_503, headers]);
  const err = await thrown(generateText({ model: aiModel(server.url), prompt: 'hi', maxRetries: 2 }));
  assert.ok(RetryError.isInstance(err));
  assert.equal(err.reason, 'maxRetriesExceeded');
  const obs = fromError(err);
  assert.equal(obs.type, 'AI_RetryError');
  assert.deepEqual(obs.cause, obs.exceptions.at(-1)); // lastError
  assert.equal(obs.exceptions.length, server.count());
  assert.equal(obs.exceptions.length, 3);
  for (const attempt of obs.exceptions) {
    assert.equal(attempt.type, 'AI_APICallError');
    assertSent(attempt, 503, headers, OVERLOADED_503);
    assert.equal(attempt.retryable, true);
  }
  assert.deepEqual(verdict(obs).slice(1), ['transient', true]);
});

test('ai: a RetryError ended by a non-retryable error keeps both attempts in order', async () => {
  const { url } = await serve([529, OVERLOADED_529, { 'retry-after': '0' }], [400, BAD_REQUEST]);
  const err = await thrown(generateText({ model: aiModel(url), prompt: 'hi', maxRetries: 3 }));
  assert.ok(RetryError.isInstance(err));
  assert.equal(err.reason, 'errorNotRetryable');
  const obs = fromError(err);
  const [first, last] = obs.exceptions;
  assert.equal(obs.exceptions.length, 2);
  assert.deepEqual(obs.cause, last); // lastError
  assertSent(first, 529, { 'retry-after': '0' }, OVERLOADED_529);
  assert.equal(first.retryable, true);
  assertSent(last, 400, {}, BAD_REQUEST);
  assert.equal(last.retryable, false);
  // decided by its lastError: a bad request is not retried
  assert.deepEqual(verdict(obs).slice(1), ['permanent', false]);
});

test('ai: a refused connection is an APICallError whose cause is the network failure', async () => {
  const url = await closedPort();
  const err = await thrown(generateText({ model: aiModel(url), prompt: 'hi', maxRetries: 0 }));
  assert.ok(APICallError.isInstance(err));
  const obs = fromError(err);
  assert.equal(obs.type, 'AI_APICallError');
  assert.equal(obs.retryable, true);
  assert.equal(obs.status, undefined);
  assert.equal(obs.cause.source, 'network');
  assert.equal(obs.cause.code, 'ECONNREFUSED');
  assert.deepEqual(verdict(obs).slice(1), ['transient', true]);
});

// ---------------------------------------------------------------- cause chains and AggregateError

test('an SDK error as the cause of a wrapper is read by its adapter, not as a network code', async () => {
  const headers = { 'retry-after': '2' };
  const { url } = await serve([429, QUOTA, headers]);
  const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${url}/v1`, maxRetries: 0 });
  const sdkErr = await thrown(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }));
  assert.equal(sdkErr.code, 'insufficient_quota'); // a string `code`, like a libc one
  const wrapper = new Error('the planner step failed', { cause: sdkErr });
  const obs = fromError(wrapper);
  assert.equal(obs.source, 'exception');
  assert.equal(obs.message, 'the planner step failed');
  assert.equal(obs.cause.source, 'http');
  assert.equal(obs.cause.status, 429);
  assert.equal(obs.cause.headers['retry-after'], '2');
  assert.deepEqual(obs.cause.body, QUOTA);
  assert.equal(obs.cause.provider, 'openai');
  assert.deepEqual(verdict(obs), QUOTA_VERDICT);
});

test('an AggregateError (Promise.any) lists each SDK error', async () => {
  const headers = { 'retry-after': '3' };
  const { url } = await serve([529, OVERLOADED_529, headers]);
  const client = new Anthropic({ apiKey: 'sk-ant-test', baseURL: url, maxRetries: 0 });
  const call = () => client.messages.create({ model: 'claude-sonnet-5-5', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
  const err = await thrown(Promise.any([call(), call()]));
  assert.ok(err instanceof AggregateError);
  const obs = fromError(err);
  assert.equal(obs.type, 'AggregateError');
  assert.equal(obs.exceptions.length, 2);
  for (const member of obs.exceptions) {
    assert.equal(member.source, 'http');
    assert.equal(member.status, 529);
    assert.equal(member.headers['retry-after'], '3');
    assert.deepEqual(member.body, OVERLOADED_529);
    assert.equal(member.provider, 'anthropic');
  }
  assert.deepEqual(verdict(obs).slice(1), ['transient', true]);
  assert.deepEqual(waitMs(obs), ['retry', 3000]);
});
