// Signed policies: the shared vectors (tests/vectors/signing/cases.json, made
// with Python's `cryptography`), and a real component refused by load and swap
// when it is tampered with after signing.

import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  Policy,
  PolicyLoadError,
  SIGNATURE_PROBLEMS,
  SignatureError,
  generateSigningKey,
  keyId,
  readSigned,
  sign,
  signaturePath,
  verifySignature,
} from '../src/index.js';
import { GEN_COMPONENT, VECTORS_DIR } from './helpers.mjs';

const VECTORS = JSON.parse(await readFile(join(VECTORS_DIR, 'signing', 'cases.json'), 'utf8'));
const pem = (name) => VECTORS.keys[name].public_pem;

let dir;
let bytes;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'agent-recovery-signing-'));
  bytes = await readFile(GEN_COMPONENT);
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The verdict in the vectors' form. */
function verdict(content, sig, trusted) {
  try {
    return { ok: true, key: verifySignature(Buffer.from(content, 'utf8'), sig, trusted.map(pem), 'policy.yaml') };
  } catch (e) {
    if (!(e instanceof SignatureError)) throw e;
    assert.equal(e.code, 'signature');
    assert.match(e.message, /policy\.yaml/, 'the message names the file');
    return { error: e.code, problem: e.problem };
  }
}

test('every signing vector gets its verdict', () => {
  assert.ok(VECTORS.cases.length >= 15);
  for (const c of VECTORS.cases) {
    assert.deepEqual(verdict(c.content, c.sig, c.trusted), c.expect, c.name);
  }
  const problems = new Set(VECTORS.cases.filter((c) => c.expect.problem).map((c) => c.expect.problem));
  assert.deepEqual([...problems].sort(), [...SIGNATURE_PROBLEMS].sort(), 'the vectors cover every problem');
});

test('key ids and signatures agree with the vectors byte for byte', () => {
  for (const [name, key] of Object.entries(VECTORS.keys)) assert.equal(keyId(key.public_pem), key.id, name);
  const { key, content, sig } = VECTORS.sign;
  assert.equal(sign(Buffer.from(content, 'utf8'), VECTORS.keys[key].private_pem), sig);
});

test('a signed component loads; tampered with, missing its .sig, or signed by another key it is refused', async () => {
  const ops = generateSigningKey();
  assert.equal(ops.id, keyId(ops.publicPem));
  const requireSignature = { trustedKeys: [ops.publicPem] };
  const path = join(dir, 'policy.wasm');
  await writeFile(path, bytes);
  await writeFile(signaturePath(path), `${sign(bytes, ops.privatePem)}\n`);
  const policy = await Policy.load(path, { requireSignature });
  const signed = policy.describe().sha256;

  const tampered = Buffer.from(bytes);
  tampered[tampered.length - 1] ^= 0x01;
  await writeFile(path, tampered);
  const refusal = await Policy.load(path, { requireSignature }).catch((e) => e);
  assert.ok(refusal instanceof SignatureError && refusal instanceof PolicyLoadError, String(refusal));
  assert.equal(refusal.code, 'signature');
  assert.equal(refusal.problem, 'bad-signature');
  assert.match(refusal.message, /policy\.wasm: bad signature/);

  // The swap path: refused, and the signed policy keeps answering.
  await assert.rejects(policy.swap(path, { requireSignature }), (e) => e.code === 'signature' && e.problem === 'bad-signature');
  assert.equal(policy.describe().sha256, signed);
  assert.equal(policy.decide({ source: 'http', status: 503 }, { attempt: 1, seed: 1 }).action, 'retry');
  // The same worker-thread load refuses it too, before a worker starts.
  await assert.rejects(Policy.load(path, { requireSignature, isolate: 'worker' }), (e) => e.problem === 'bad-signature');

  await writeFile(path, bytes);
  await rm(signaturePath(path));
  await assert.rejects(policy.swap(path, { requireSignature }), (e) => e.problem === 'missing');
  const other = generateKeyPairSync('ed25519').privateKey;
  await writeFile(signaturePath(path), sign(bytes, other));
  await assert.rejects(policy.swap(path, { requireSignature }), (e) => e.problem === 'unknown-key');
  // Bytes carry their .sig text in the option.
  await assert.rejects(policy.swap(bytes, { requireSignature }), (e) => e.problem === 'missing');
  const described = await policy.swap(bytes, { requireSignature: { ...requireSignature, signature: sign(bytes, ops.privatePem) } });
  assert.equal(described.sha256, signed);
  // Without requireSignature nothing is checked, as before.
  await policy.swap(path);
});

test('a signed policy document is read only when its signature holds', async () => {
  const ops = generateSigningKey();
  const doc = join(dir, 'checkout.yaml');
  const text = Buffer.from(VECTORS.sign.content, 'utf8');
  await writeFile(doc, text);
  await writeFile(signaturePath(doc), sign(text, ops.privatePem));
  assert.deepEqual(await readSigned(doc, { trustedKeys: [ops.publicPem] }), text);
  await writeFile(doc, Buffer.from(VECTORS.sign.content.replace('max_attempts: 2', 'max_attempts: 9'), 'utf8'));
  await assert.rejects(readSigned(doc, { trustedKeys: [ops.publicPem] }), (e) => e.code === 'signature' && e.problem === 'bad-signature');
});

test('a trusted key that is not an Ed25519 public key is an invalid argument', async () => {
  const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' });
  for (const key of ['not a key', rsa]) {
    assert.throws(() => verifySignature(Buffer.from('x'), VECTORS.sign.sig, [key]), (e) => e.code === 'invalid-argument');
  }
  await assert.rejects(Policy.load(GEN_COMPONENT, { requireSignature: { trustedKeys: 'a key' } }), (e) => e.code === 'invalid-argument');
});
