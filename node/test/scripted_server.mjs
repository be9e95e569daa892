// The scripted model provider and payment tool (tests/frameworks/scripted_server.py),
// spawned as a child process on 127.0.0.1 for the framework adapter tests and the
// frameworks table (node/bench/frameworks-table.mjs).

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const SERVER = fileURLToPath(new URL('../../tests/frameworks/scripted_server.py', import.meta.url));

/** Start the server; resolves with `{url, script(queues, toolArgs), stats(), close()}`. */
export async function scriptedServer() {
  const child = spawn('python3', [SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const line = await new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout });
    rl.once('line', (l) => {
      rl.close();
      resolve(l);
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`scripted_server.py exited with ${code} before printing its port; is python3 on PATH?`)));
  });
  const { port } = JSON.parse(line);
  const url = `http://127.0.0.1:${port}`;
  const post = async (path, body) => {
    const r = await fetch(`${url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    if (!r.ok) throw new Error(`POST ${path}: HTTP ${r.status}`);
  };
  return {
    url,
    /** Replace the script (and reset the stats). */
    script: (queues, toolArgs = {}) => post('/_script', { queues, tool_args: toolArgs }),
    /** `{requests: {route: n}, charges, log}`. */
    stats: async () => (await fetch(`${url}/_stats`)).json(),
    close: async () => {
      child.kill();
      await exited;
    },
  };
}

/** The error bodies the scripts send, as the providers document them. */
export const BODIES = Object.freeze({
  // https://platform.openai.com/docs/guides/error-codes (429 rate limit, 429 quota, 503 overloaded)
  rateLimit: { error: { message: 'Rate limit reached for requests', type: 'requests', param: null, code: 'rate_limit_exceeded' } },
  quota: {
    error: {
      message: 'You exceeded your current quota, please check your plan and billing details.',
      type: 'insufficient_quota',
      param: null,
      code: 'insufficient_quota',
    },
  },
  overloaded: { error: { message: 'The server is overloaded or not ready yet.', type: 'server_error', param: null, code: null } },
  // https://docs.stripe.com/declines/codes and https://docs.stripe.com/api/errors (402 card_error)
  declined: { error: { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' } },
});
