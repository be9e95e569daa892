// Signed policies: a detached Ed25519 signature beside a policy file, checked
// against the public keys the operator trusts before the policy is loaded.
//
// FILE.sig is {"alg":"ed25519","key":"sha256:<hex>","sig":"<base64>"}: `key`
// is the hex sha256 of the signer's public key as SubjectPublicKeyInfo DER,
// `sig` the padded base64 of the Ed25519 (RFC 8032) signature over the exact
// bytes of FILE. The checks and their order are the Rust and Python hosts'
// (docs/signing.md; pinned by tests/vectors/signing/). The crypto is
// node:crypto's (OpenSSL); nothing here is hand-written.

import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, KeyObject, sign as cryptoSign, verify as cryptoVerify } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { PolicyLoadError } from './errors.js';

/** Why a signature is refused, in the order the checks run. */
export const SIGNATURE_PROBLEMS = Object.freeze(['missing', 'malformed', 'unsupported-alg', 'unknown-key', 'bad-signature']);

const ALG = 'ed25519';
const MAX_SIG_BYTES = 64 << 10;

/**
 * A signature was required and refused: `code` is `signature`, `problem` one
 * of SIGNATURE_PROBLEMS; the message names the file and ends with a hint.
 */
export class SignatureError extends PolicyLoadError {
  constructor(problem, message) {
    super('signature', message, { code: 'signature' });
    this.name = 'SignatureError';
    this.problem = problem;
  }
}

function invalid(message) {
  return new PolicyLoadError('signature', message, { code: 'invalid-argument' });
}

/** A public KeyObject from a PEM string or Buffer, or a KeyObject; must be Ed25519. */
function publicKey(key) {
  let object;
  try {
    object = key instanceof KeyObject ? key : createPublicKey(key);
  } catch (e) {
    throw invalid(`a trusted key must be an Ed25519 public key in PEM (${e.message}); pass the .pub file written by \`agent-recovery policy keygen\``);
  }
  if (object.type === 'private') object = createPublicKey(object);
  if (object.asymmetricKeyType !== 'ed25519') {
    throw invalid(`a trusted key must be an Ed25519 public key, got ${object.asymmetricKeyType}; pass the .pub file written by \`agent-recovery policy keygen\``);
  }
  return object;
}

/** The key id of a public (or private) key: `sha256:` and the hex sha256 of its SubjectPublicKeyInfo DER. */
export function keyId(key) {
  const der = publicKey(key).export({ type: 'spki', format: 'der' });
  return `sha256:${createHash('sha256').update(der).digest('hex')}`;
}

/** Trusted keys as [{id, key}]; accepts PEM strings, Buffers or KeyObjects. */
function trusted(keys) {
  if (!Array.isArray(keys)) throw invalid('requireSignature.trustedKeys must be an array of Ed25519 public keys (PEM text or KeyObject)');
  return keys.map((key) => ({ id: keyId(key), key: publicKey(key) }));
}

/** Where the signature of `path` is: `path` with `.sig` appended. */
export function signaturePath(path) {
  return `${path instanceof URL ? fileURLToPath(path) : path}.sig`;
}

/** A new key pair: `{privatePem, publicPem, id}` (PKCS#8 and SubjectPublicKeyInfo PEM). */
export function generateSigningKey() {
  const { privateKey, publicKey: pub } = generateKeyPairSync('ed25519');
  return {
    privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }),
    publicPem: pub.export({ type: 'spki', format: 'pem' }),
    id: keyId(pub),
  };
}

/** Signs `bytes` with an Ed25519 private key (PKCS#8 PEM or KeyObject); returns the `.sig` JSON text. */
export function sign(bytes, privateKey) {
  const key = privateKey instanceof KeyObject ? privateKey : createPrivateKey(privateKey);
  if (key.asymmetricKeyType !== 'ed25519') throw invalid(`a signing key must be Ed25519, got ${key.asymmetricKeyType}`);
  const sig = cryptoSign(null, bytes, key).toString('base64');
  return JSON.stringify({ alg: ALG, key: keyId(key), sig });
}

/**
 * Checks `signature` (the `.sig` text or bytes; null or undefined: none) over
 * `bytes` against `trustedKeys`; returns the id of the key that signed, or
 * throws a SignatureError. `label` names the file in messages.
 */
export function verifySignature(bytes, signature, trustedKeys, label = 'the policy') {
  const keys = trusted(trustedKeys);
  if (signature === null || signature === undefined) {
    throw new SignatureError(
      'missing',
      `${label}: no signature (${label}.sig); sign it with \`agent-recovery policy sign ${label} --key KEY\`, or load it without requireSignature`,
    );
  }
  const malformed = (what) =>
    new SignatureError(
      'malformed',
      `${label}.sig is malformed: ${what}; expected {"alg":"ed25519","key":"sha256:<hex>","sig":"<base64>"} as written by \`agent-recovery policy sign\``,
    );
  const text = typeof signature === 'string' ? signature : Buffer.from(signature).toString('utf8');
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw malformed(`not JSON (${e.message})`);
  }
  const field = (name) => {
    const v = value !== null && typeof value === 'object' && !Array.isArray(value) ? value[name] : undefined;
    if (typeof v !== 'string') throw malformed(`no string member "${name}"`);
    return v;
  };
  const alg = field('alg');
  const key = field('key');
  const sig = field('sig');
  if (alg !== ALG) {
    throw new SignatureError(
      'unsupported-alg',
      `${label}.sig: unsupported alg ${JSON.stringify(alg.slice(0, 40))}; only "ed25519" is accepted, re-sign with \`agent-recovery policy sign\``,
    );
  }
  if (!/^sha256:[0-9a-f]{64}$/.test(key)) throw malformed('"key" is not sha256: and 64 lowercase hex digits');
  const raw = Buffer.from(sig, 'base64');
  // Buffer's base64 decoder skips what it cannot read: require the canonical form.
  if (raw.length !== 64 || raw.toString('base64') !== sig) throw malformed('"sig" is not the base64 of 64 bytes');
  const match = keys.find((k) => k.id === key);
  if (match === undefined) {
    throw new SignatureError(
      'unknown-key',
      `${label}: signed by key ${key}, which is not trusted; trust its public key (requireSignature.trustedKeys), or re-sign the file with a trusted key`,
    );
  }
  if (!cryptoVerify(null, bytes, match.key, raw)) {
    throw new SignatureError(
      'bad-signature',
      `${label}: bad signature: the signature by ${key} does not match its content; the file or its .sig changed after signing, restore the signed file or sign it again`,
    );
  }
  return key;
}

/** The `.sig` text of `path`, or null when there is none. */
async function readSignature(path) {
  const sigPath = signaturePath(path);
  let bytes;
  try {
    bytes = await readFile(sigPath);
  } catch (e) {
    if (e.code === 'ENOENT') return null;
    throw new PolicyLoadError('read', `cannot read signature ${sigPath} (${e.code ?? e.message}); check its permissions`, { cause: e });
  }
  return bytes.subarray(0, MAX_SIG_BYTES);
}

/**
 * Reads the policy file at `path` (a component or a policy document) and its
 * `.sig`, and checks the signature; returns the verified bytes (load those:
 * reading the file again could read other bytes).
 * @param {string | URL} path
 * @param {{trustedKeys: Array<string | Buffer | KeyObject>}} options
 */
export async function readSigned(path, { trustedKeys } = {}) {
  const label = path instanceof URL ? fileURLToPath(path) : String(path);
  let bytes;
  try {
    bytes = await readFile(path);
  } catch (e) {
    throw new PolicyLoadError('read', `cannot read policy ${label} (${e.code ?? e.message}); check the path`, { cause: e });
  }
  verifySignature(bytes, await readSignature(path), trustedKeys, label);
  return bytes;
}

/**
 * The signature check of a load or swap with `requireSignature:
 * {trustedKeys, signature?}`: a path's `.sig` is read beside it; bytes need
 * `signature` (the `.sig` text). Returns the `.sig` text to check, or null.
 */
export async function signatureFor(source, requireSignature) {
  if (requireSignature.signature !== undefined && requireSignature.signature !== null) return requireSignature.signature;
  if (typeof source === 'string' || source instanceof URL) return readSignature(source);
  return null;
}

/** Validates the `requireSignature` option; returns it, or undefined when absent. */
export function requireSignatureOption(option) {
  if (option === undefined || option === null) return undefined;
  if (typeof option !== 'object' || !Array.isArray(option.trustedKeys)) {
    throw invalid('requireSignature must be {trustedKeys: [public key PEM, ...], signature?: .sig text}');
  }
  trusted(option.trustedKeys);
  return option;
}
