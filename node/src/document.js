// Policy documents: the reference component with a declarative document
// packed into its slot (docs/policy-documents.md). The component validates
// the document (at its first call) and applies it; this module only writes
// the document's JSON text into the slot of a copy of the reference
// component, as the Rust and Python hosts do. YAML is the caller's to read
// (e.g. the `yaml` package); the component reads JSON.

import { readFile } from 'node:fs/promises';
import { GEN_DIR } from './component.js';
import { PolicyRuntimeError } from './errors.js';

/** The 32 bytes that open the reference component's document slot. */
export const SLOT_MARKER = new TextEncoder().encode('agent-recovery/policy-document/1');
/** The slot's size in bytes: marker, little-endian u32 length, document text. */
export const SLOT_BYTES = 16 * 1024;

const bad = (message) => new PolicyRuntimeError(message, { code: 'invalid-argument' });

/** JSON text with object keys sorted (the canonical form of the digest). */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function indexOf(bytes, needle, from = 0) {
  outer: for (let i = from; i <= bytes.length - needle.length; i++) {
    for (let j = 0; j < needle.length; j++) if (bytes[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/**
 * A copy of the reference component (or `component`, which must have an
 * empty slot) with `document` (an object, or JSON text) packed into its slot.
 * Load the result with `Policy.load(bytes)`; a document that does not
 * validate fails its smoke run there, with the bad path named.
 * @param {object | string} document
 * @param {Uint8Array} [component]
 * @returns {Promise<Uint8Array>}
 */
export async function packDocument(document, component) {
  let doc = document;
  if (typeof doc === 'string') {
    try {
      doc = JSON.parse(doc);
    } catch (e) {
      throw bad(`the policy document is not JSON (${e.message}); pass an object or JSON text`);
    }
  }
  const data = new TextEncoder().encode(canonical(doc));
  const wasm = new Uint8Array(component ?? (await readFile(new URL('component.wasm', GEN_DIR))));
  const room = SLOT_BYTES - SLOT_MARKER.length - 4;
  if (data.length > room) {
    throw bad(`the policy document is ${data.length} bytes as JSON, more than the ${room} its slot holds; shorten its hints and causes`);
  }
  const at = indexOf(wasm, SLOT_MARKER);
  if (at < 0 || indexOf(wasm, SLOT_MARKER, at + 1) >= 0) {
    throw bad('the component does not have exactly one policy document slot; pack into the reference component');
  }
  const start = at + SLOT_MARKER.length;
  if (wasm.subarray(start, start + 4 + room).some((b) => b !== 0)) {
    throw bad('the component already holds a policy document; pack into the reference component');
  }
  new DataView(wasm.buffer, wasm.byteOffset).setUint32(start, data.length, true);
  wasm.set(data, start + 4);
  return wasm;
}
