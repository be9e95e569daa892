#!/usr/bin/env node
// The SDK corpus: real failures of the OpenAI and Anthropic Node SDKs, made by
// driving the real clients (devDependencies) against a local server, scored
// two ways on the same cases:
//
// - ours: fromError(err) -> policy.classify: are `class` and `retryable` the
//   expected ones?
// - the SDK's own retry rule: with `maxRetries: 1`, did the SDK make a second
//   attempt (counted at its `fetch`) exactly when the failure is retryable?
//
//   npm run build && node bench/sdk-corpus.mjs [--json]
//
// The expected values come from the providers' docs and the specification of the classes (429, 5xx,
// timeouts, resets: transient; other 4xx and auth: permanent; quota: policy):
//   OpenAI    https://platform.openai.com/docs/guides/error-codes
//   Anthropic https://docs.anthropic.com/en/api/errors (and /en/api/rate-limits
//             for spend limits)
// The SDKs honour Retry-After, so the corpus sends `retry-after: 1`: a run
// takes a few seconds of real waiting.

import { createServer } from 'node:http';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Policy, fromError } from '../src/index.js';

const json = (status, body, headers = {}) => (res) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};
const hang = () => () => {};
const drop = () => (res) => res.socket.destroy();
const stream = (events) => (res) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.end(events);
};
const oai = (message, type, code, param = null) => ({ error: { message, type, param, code } });
const ant = (type, message, details) => ({ type: 'error', error: { type, message, ...(details && { details }) } });

const T = { class: 'transient', retryable: true };
const PERM = { class: 'permanent', retryable: false };
const POLICY = { class: 'policy', retryable: false };

/** [provider, case, answer (or 'refused'), expected, streaming?] */
const CASES = [
  ['openai', '429 rate_limit_exceeded', json(429, oai('Rate limit reached for requests', 'requests', 'rate_limit_exceeded'), { 'retry-after': '1' }), T],
  ['openai', '429 insufficient_quota', json(429, oai('You exceeded your current quota', 'insufficient_quota', 'insufficient_quota')), POLICY],
  ['openai', '500 server_error', json(500, oai('The server had an error while processing your request.', 'server_error', null)), T],
  ['openai', '503 overloaded', json(503, oai('The engine is currently overloaded, please try again later.', 'server_error', null)), T],
  ['openai', '400 invalid_request_error', json(400, oai("Invalid value for 'temperature'.", 'invalid_request_error', 'invalid_value', 'temperature')), PERM],
  ['openai', '401 invalid_api_key', json(401, oai('Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key')), PERM],
  ['openai', '403 unsupported_country', json(403, oai('Country, region, or territory not supported', 'request_forbidden', 'unsupported_country_region_territory')), PERM],
  ['openai', '404 model_not_found', json(404, oai('The model `gpt-9` does not exist', 'invalid_request_error', 'model_not_found', 'model')), PERM],
  ['openai', 'SDK timeout', hang(), T],
  ['openai', 'connection refused', 'refused', T],
  ['openai', 'connection dropped', drop(), T],
  ['openai', 'mid-stream server_error', stream(`data: ${JSON.stringify(oai('The server had an error', 'server_error', null))}\n\n`), T, true],
  ['anthropic', '529 overloaded_error', json(529, ant('overloaded_error', 'Overloaded')), T],
  ['anthropic', '429 rate_limit_error', json(429, ant('rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit'), { 'retry-after': '1' }), T],
  ['anthropic', '500 api_error', json(500, ant('api_error', 'Internal server error')), T],
  ['anthropic', '400 invalid_request_error', json(400, ant('invalid_request_error', 'max_tokens: Field required')), PERM],
  ['anthropic', '401 authentication_error', json(401, ant('authentication_error', 'invalid x-api-key')), PERM],
  ['anthropic', '403 permission_error', json(403, ant('permission_error', 'Your API key does not have permission to use the specified resource.')), PERM],
  ['anthropic', '404 not_found_error', json(404, ant('not_found_error', 'model: claude-9')), PERM],
  ['anthropic', '402 billing_error', json(402, ant('billing_error', 'Your credit balance is too low.')), POLICY],
  ['anthropic', '429 spend limit (error_code)', json(429, ant('rate_limit_error', 'Contract spend limit reached.', { error_code: 'contract_spend_limit_reached' })), POLICY],
  ['anthropic', 'SDK timeout', hang(), T],
  ['anthropic', 'connection refused', 'refused', T],
  ['anthropic', 'connection dropped', drop(), T],
  ['anthropic', 'mid-stream overloaded_error', stream(`event: error\ndata: ${JSON.stringify(ant('overloaded_error', 'Overloaded'))}\n\n`), T, true],
];

const CHAT = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
const MESSAGE = { model: 'claude-sonnet-5-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] };

async function listen(handler) {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(res));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** The error one call raises, and how many times the SDK called fetch. */
async function run(provider, answer, streaming, maxRetries) {
  let server;
  let url;
  if (answer === 'refused') {
    server = await listen(() => {});
    url = `http://127.0.0.1:${server.address().port}`;
    await new Promise((resolve) => server.close(resolve));
    server = undefined;
  } else {
    server = await listen(answer);
    url = `http://127.0.0.1:${server.address().port}`;
  }
  let fetches = 0;
  const counting = (...args) => {
    fetches++;
    return fetch(...args);
  };
  const common = { maxRetries, timeout: 300, fetch: counting };
  try {
    if (provider === 'openai') {
      const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${url}/v1`, ...common });
      const r = await client.chat.completions.create({ ...CHAT, stream: streaming });
      if (streaming) for await (const _ of r);
    } else {
      const client = new Anthropic({ apiKey: 'sk-ant-test', baseURL: url, ...common });
      const r = await client.messages.create({ ...MESSAGE, stream: streaming });
      if (streaming) for await (const _ of r);
    }
    throw new Error('the call succeeded; every corpus case is a failure');
  } catch (err) {
    return { err, fetches };
  } finally {
    if (server) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }
}

const policy = await Policy.load();
const rows = [];
for (const [provider, name, answer, expect, streaming = false] of CASES) {
  const { err } = await run(provider, answer, streaming, 0);
  const env = policy.classify(fromError(err));
  const { fetches } = await run(provider, answer, streaming, 1);
  const sdkRetried = fetches > 1;
  rows.push({
    provider,
    case: name,
    error: err.constructor?.name === 'Error' ? err.name : err.constructor?.name,
    expect,
    ours: { code: env.code, class: env.class, retryable: env.retryable },
    oursRight: env.class === expect.class && env.retryable === expect.retryable,
    sdkRetried,
    sdkRight: sdkRetried === expect.retryable,
  });
}

if (process.argv.includes('--json')) {
  console.log(JSON.stringify(rows, null, 2));
} else {
  const mark = (b) => (b ? 'yes' : 'NO');
  console.log('| SDK | case | SDK error | expected | ours (code, class, retryable) | right | SDK retried | right |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${r.provider} | ${r.case} | ${r.error} | ${r.expect.class}, ${r.expect.retryable} | ${r.ours.code}, ${r.ours.class}, ${r.ours.retryable} | ${mark(r.oursRight)} | ${r.sdkRetried} | ${mark(r.sdkRight)} |`,
    );
  }
  const n = rows.length;
  const ours = rows.filter((r) => r.oursRight).length;
  const sdk = rows.filter((r) => r.sdkRight).length;
  console.log(`\nours: ${ours}/${n} right on class and retryable; the SDKs' own retry rule: ${sdk}/${n} right on retry`);
}
