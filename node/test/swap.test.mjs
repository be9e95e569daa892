// Hot swap: a candidate is loaded and validated before it is switched in; on
// any failure the old policy keeps answering.

import assert from 'node:assert/strict';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Policy, PolicyLoadError, PolicyRuntimeError, RecoveryError, retry } from '../src/index.js';
import { emptyComponent, filesystemComponent, fixedComponent, trappingComponent } from './fixtures.mjs';
import { GEN_COMPONENT, artifact, fakeSleep } from './helpers.mjs';

let dir;
let reference;
let bytes;
const OBS = '{"source":"http","status":503}';
const CTX = '{"call":"tool","attempt":1,"seed":1}';

const FIXED_SMOKE = JSON.stringify([
  { observation: { source: 'http', status: 503 }, context: { attempt: 1 }, expect: { action: 'retry', code: 'tool.http.503_unavailable' } },
]);
const FIXED_DECISION = JSON.stringify({
  action: 'retry',
  delay_ms: 5,
  attempt: 1,
  max_attempts: 3,
  budget_remaining_ms: 100,
  reason: 'transient',
  reason_code: null,
  envelope: { code: 'tool.http.503_unavailable', message: 'fixed', hint: 'fixed' },
});

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'agent-recovery-swap-'));
  reference = await Policy.load();
  bytes = await readFile(GEN_COMPONENT);
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The old policy still answers, and it is still the old one. */
function assertStillReference(policy) {
  assert.equal(policy.describe().sha256, reference.describe().sha256);
  assert.equal(policy.decideJson(OBS, CTX), reference.decideJson(OBS, CTX));
}

async function refused(promise, reason, pattern) {
  const err = await promise.then(
    () => assert.fail('the swap was accepted'),
    (e) => e,
  );
  assert.ok(err instanceof PolicyLoadError, `${err?.name}: ${err?.message}`);
  assert.ok(err instanceof PolicyRuntimeError);
  assert.equal(err.reason, reason, err.message);
  if (pattern) assert.match(err.message, pattern);
  return err;
}

test('swap to a copy of the reference: validated, switched, same answers', async () => {
  const policy = await Policy.load();
  const copy = join(dir, 'copy.wasm');
  await copyFile(GEN_COMPONENT, copy);
  const described = await policy.swap(copy, { sha256: `sha256:${reference.describe().sha256.toUpperCase()}` });
  assert.equal(described.source, copy);
  assert.equal(policy.describe().source, copy);
  assert.equal(described.sha256, reference.describe().sha256);
  assert.equal(policy.decideJson(OBS, CTX), reference.decideJson(OBS, CTX));
});

test('a truncated file is refused and the old policy keeps answering', async () => {
  const policy = await Policy.load();
  const truncated = join(dir, 'truncated.wasm');
  await writeFile(truncated, bytes.subarray(0, Math.floor(bytes.length / 2)));
  await refused(policy.swap(truncated), 'transpile', /not a loadable WebAssembly component/);
  assertStillReference(policy);
  await refused(policy.swap(new Uint8Array([0, 97, 115, 109])), 'transpile');
  await refused(policy.swap(new TextEncoder().encode('not wasm at all')), 'transpile');
  assertStillReference(policy);
});

test('a sha256 mismatch is refused before the bytes are read as a component', async () => {
  const policy = await Policy.load();
  const copy = join(dir, 'pinned.wasm');
  await copyFile(GEN_COMPONENT, copy);
  const err = await refused(policy.swap(copy, { sha256: '0'.repeat(64) }), 'digest_mismatch', /not the pinned/);
  assert.match(err.message, new RegExp(reference.describe().sha256));
  await refused(policy.swap(copy, { sha256: 'abc' }), 'digest_mismatch', /64 hex digits/);
  assertStillReference(policy);
});

test('a missing file, or not a source at all, is refused', async () => {
  const policy = await Policy.load();
  await refused(policy.swap(join(dir, 'nope.wasm')), 'read', /ENOENT/);
  await refused(policy.swap(42), 'read');
  assertStillReference(policy);
});

test('a component that imports the filesystem is refused', async () => {
  const policy = await Policy.load();
  await refused(policy.swap(await filesystemComponent()), 'imports', /wasi:filesystem\/preopens/);
  assertStillReference(policy);
});

test('a component without the contract is refused', async () => {
  const policy = await Policy.load();
  await refused(policy.swap(await emptyComponent()), 'contract', /does not export agent:recovery/);
  assertStillReference(policy);
});

test('a component that traps while starting is refused', async () => {
  const policy = await Policy.load();
  await refused(policy.swap(await trappingComponent()), 'instantiate', /failed in info/);
  assertStillReference(policy);
});

test('a candidate failing a smoke case is refused, naming the case', async () => {
  const policy = await Policy.load();
  // Its own smoke set is wrong about itself...
  const liar = await fixedComponent({
    name: 'liar',
    smoke: FIXED_SMOKE.replace('"retry"', '"fail"'),
    decision: FIXED_DECISION,
  });
  await refused(policy.swap(liar), 'smoke_test', /liar 0\.0\.1 failed smoke case 0: expected action "fail", got "retry"/);
  // ...or the caller's own acceptance cases say no.
  const ok = await fixedComponent({ name: 'fixed', smoke: FIXED_SMOKE, decision: FIXED_DECISION });
  const extra = [{ observation: { source: 'http', status: 400 }, expect: { action: 'fail' } }];
  await refused(policy.swap(ok, { smokeTests: extra }), 'smoke_test', /added case 0/);
  await refused(policy.swap(ok, { smokeTests: '{"not":"an array"}' }), 'smoke_test', /array/);
  // A decision that is not JSON at all.
  const garbled = await fixedComponent({ name: 'garbled', smoke: FIXED_SMOKE, decision: '{"action":' });
  await refused(policy.swap(garbled), 'smoke_test', /garbled 0\.0\.1 failed smoke case 0/);
  // An empty smoke set is refused too.
  const silent = await fixedComponent({ name: 'silent', smoke: '[]', decision: FIXED_DECISION });
  await refused(policy.swap(silent), 'smoke_test', /empty smoke set/);
  assertStillReference(policy);
});

test('another policy answers after a swap, and says so on every decision', async () => {
  const policy = await Policy.load();
  const fixed = await fixedComponent({ name: 'fixed', smoke: FIXED_SMOKE, decision: FIXED_DECISION });
  const before = policy.decide({ source: 'http', status: 503 }, { attempt: 1, seed: 1 });
  assert.equal(before.policy.name, 'agent-recovery-reference');
  await policy.swap(fixed);
  const d = policy.decide({ source: 'http', status: 404 }, { attempt: 1 });
  assert.equal(d.delay_ms, 5);
  assert.equal(d.policy.name, 'fixed');
  assert.equal(d.policy.version, '0.0.1');
  assert.notEqual(d.policy.sha256, before.policy.sha256);
  assert.equal(policy.decideJson('{}', '{}'), FIXED_DECISION);
  // And back.
  await policy.swap(GEN_COMPONENT);
  assertStillReference(policy);
});

test('a trap is a PolicyRuntimeError, and the next call gets a fresh instance', async () => {
  const policy = await Policy.load(await fixedComponent({ name: 'fixed', smoke: FIXED_SMOKE, decision: FIXED_DECISION }));
  assert.throws(() => policy.classify({ source: 'http', status: 500 }), (e) => {
    assert.ok(e instanceof PolicyRuntimeError && !(e instanceof PolicyLoadError), String(e));
    assert.match(e.message, /fixed 0\.0\.1 failed in classifyJson/);
    assert.match(String(e.cause), /unreachable/);
    return true;
  });
  assert.equal(policy.describe().traps, 1);
  assert.equal(policy.decide({ source: 'http', status: 503 }, { attempt: 1 }).delay_ms, 5);
  assert.throws(() => policy.key({ runId: 'r', stepId: 's', tool: 't' }), PolicyRuntimeError);
  assert.equal(policy.describe().traps, 2);
});

// examples/payments-policy, as host/build.rs builds it (the test fails if it is missing).
test('hot swap to the payments policy (examples/payments-policy)', async () => {
  const PAYMENTS = process.env.AGENT_RECOVERY_PAYMENTS_WASM ?? artifact('payments-policy');
  const policy = await Policy.load();
  const conflict = { source: 'http', status: 409 };
  const before = policy.decide(conflict, { attempt: 1 });
  const described = await policy.swap(await readFile(PAYMENTS));
  assert.equal(described.name, 'payments-strict');
  const after = policy.decide(conflict, { attempt: 1 });
  assert.equal(after.policy.name, 'payments-strict');
  assert.equal(after.action, 'fail');
  assert.notEqual(before.policy.sha256, after.policy.sha256);
});

test('concurrent swaps run one at a time, in order; a failed one changes nothing', async () => {
  const policy = await Policy.load();
  const fixed = await fixedComponent({ name: 'fixed', smoke: FIXED_SMOKE, decision: FIXED_DECISION });
  const results = await Promise.allSettled([
    policy.swap(fixed),
    policy.swap(new Uint8Array([1, 2, 3])),
    policy.swap(GEN_COMPONENT),
  ]);
  assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
  assert.equal(results[0].value.name, 'fixed');
  assertStillReference(policy);
});

test('a retry loop in flight sees the swap at its next decision', async () => {
  const policy = await Policy.load();
  const fixed = await fixedComponent({ name: 'fixed', smoke: FIXED_SMOKE, decision: FIXED_DECISION });
  const { sleep, delays } = fakeSleep();
  const answeredBy = [];
  let n = 0;
  const out = await retry(
    async () => {
      n++;
      if (n === 2) await policy.swap(fixed);
      if (n < 3) throw Object.assign(new Error('reset'), { code: 'ECONNRESET' });
      return 'ok';
    },
    {
      policy,
      runId: 'r',
      stepId: 's',
      tool: 't',
      seed: 1,
      sleep,
      onDecision: ({ decision }) => answeredBy.push(decision.policy.name),
    },
  );
  assert.equal(out, 'ok');
  assert.deepEqual(answeredBy, ['agent-recovery-reference', 'fixed']);
  assert.equal(delays[1], 5);
  await assert.rejects(
    retry(async () => http400(), { policy: await Policy.load(), runId: 'r', stepId: 's', tool: 't', sleep }),
    RecoveryError,
  );
});

function http400() {
  return new Response('bad', { status: 400 });
}
