// The conformance driver: one output line per input line, the component's text
// unchanged, `ERROR <kind> <message>` for policy errors.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { before, test } from 'node:test';
import { Policy, PolicyError } from '../src/index.js';
import { loadVectors } from './helpers.mjs';

const DRIVER = fileURLToPath(new URL('../scripts/conformance.mjs', import.meta.url));
let policy;
before(async () => {
  policy = await Policy.load();
});

/** What the driver prints for one call. */
function line(run) {
  try {
    return run();
  } catch (e) {
    if (e instanceof PolicyError) return `ERROR ${e.kind} ${e.message}`;
    throw e;
  }
}

function drive(lines, args = []) {
  const r = spawnSync(process.execPath, [DRIVER, ...args], { input: `${lines.join('\n')}\n`, encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, r.stderr);
  const out = r.stdout.split('\n');
  assert.equal(out.pop(), '');
  return out;
}

test('every vector through the driver gives the in-process text, byte for byte', () => {
  const lines = [];
  const want = [];
  for (const { cases } of loadVectors()) {
    for (const c of cases) {
      lines.push(JSON.stringify({ op: 'classify', observation: c.obsText }));
      want.push(line(() => policy.classifyJson(c.obsText)));
      // Without a seed a retry delay is a draw from WASI random: compare only
      // the decisions that are reproducible.
      const decided = line(() => policy.decideJson(c.obsText, c.ctxText));
      if (c.context?.seed === undefined && decided.startsWith('{"action":"retry"')) continue;
      lines.push(JSON.stringify({ op: 'decide', observation: c.obsText, context: c.ctxText }));
      want.push(decided);
    }
  }
  assert.deepEqual(drive(lines), want);
});

test('key, backoff (seed beyond 2^53 as a number), render and errors', () => {
  const env = policy.classifyJson('{"source":"network","code":"ECONNRESET"}');
  const out = drive([
    '{"op":"key","run_id":"run-1","step_id":"s1","tool":"search","args":"{\\"q\\":\\"x\\",\\"page\\":2}"}',
    '{"op":"backoff","call":"tool","attempt":1,"seed":18446744073709551615}',
    '{"op":"backoff","call":"tool","attempt":1,"seed":"18446744073709551615"}',
    '{"op":"backoff","call":"tool","attempt":3,"seed":7,"config":"{\\"tool\\":{\\"base_ms\\":100,\\"cap_ms\\":200,\\"max_attempts\\":9}}"}',
    JSON.stringify({ op: 'render', envelope: env, format: 'jsonrpc-error', options: '{"id":3}' }),
    JSON.stringify({ op: 'render', envelope: env, format: 'coordinator-text' }),
    '',
    '{"op":"classify","observation":"{not json"}',
    '{"op":"decide","observation":"{\\"source\\":\\"http\\",\\"status\\":503}","context":"{\\"attempt\\":0}"}',
    '{"op":"backoff","call":"tool","attempt":0,"seed":1}',
    '{"op":"fly"}',
    'not json',
    '{"op":"classify","observation":{"source":"http"}}',
    '[1,2]',
    '{"op":"backoff","call":"tool","attempt":1,"config":"{nope"}',
  ]);
  assert.equal(out.length, 14);
  assert.equal(out[0], policy.key({ runId: 'run-1', stepId: 's1', tool: 'search', args: { page: 2, q: 'x' } }));
  assert.equal(out[1], '160');
  assert.equal(out[2], '160');
  assert.ok(Number(out[3]) <= 200);
  assert.equal(out[4], policy.renderJson(env, 'jsonrpc-error', '{"id":3}'));
  assert.equal(out[5], policy.renderJson(env, 'coordinator-text', ''));
  assert.match(out[6], /^ERROR invalid_json observation is not valid JSON/);
  assert.match(out[7], /^ERROR invalid_context attempt must be at least 1/);
  assert.match(out[8], /^ERROR invalid_argument attempt must be at least 1/);
  assert.match(out[9], /^ERROR invalid_argument unknown op "fly"/);
  assert.match(out[10], /^ERROR invalid_json input line 12 is not JSON/);
  assert.match(out[11], /^ERROR invalid_argument "observation" must be JSON text/);
  assert.match(out[12], /^ERROR invalid_json input line 14 is not a JSON object/);
  assert.match(out[13], /^ERROR invalid_config "config" is not JSON/);
});

test('the driver loads another component with --component', () => {
  const path = fileURLToPath(new URL('../gen/component.wasm', import.meta.url));
  const obs = '{"source":"timeout","phase":"read","after_ms":5000}';
  assert.deepEqual(drive([JSON.stringify({ op: 'classify', observation: obs })], ['--component', path]), [policy.classifyJson(obs)]);
});
