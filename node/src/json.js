// JSON helpers that do not lose integers.
//
// JavaScript numbers hold integers exactly only up to 2^53; the policy's u64
// fields (seeds above all) may be larger. `stringify` writes a BigInt as a bare
// integer literal, and `parseLossless` reads integers beyond 2^53 as BigInt and
// remembers the raw text of every object member, so a value can be handed to the
// component exactly as it was written (tests/vectors holds `"seed": 18446744073709551615`).

import { PolicyError } from './errors.js';

const U64_MAX = (1n << 64n) - 1n;

/**
 * JSON.stringify, but a BigInt becomes a bare integer literal and a RawJson its
 * text, unchanged. `check(holder, key, value)`, when given, sees every value
 * first (after `toJSON`) and returns the value to write.
 */
export function stringify(value, check) {
  // The mark of a BigInt or RawJson's place, made when the first is found.
  let mark;
  const raws = [];
  const text = JSON.stringify(value, function replacer(key, v0) {
    const v = check === undefined ? v0 : check(this, key, v0);
    if (typeof v === 'bigint') {
      mark ??= `\u0000bigint:${Math.random().toString(36).slice(2)}:`;
      return mark + v.toString();
    }
    if (v instanceof RawJson) {
      mark ??= `\u0000bigint:${Math.random().toString(36).slice(2)}:`;
      raws.push(v.text);
      return `${mark}r${raws.length - 1}`;
    }
    return v;
  });
  if (mark === undefined || text === undefined) return text;
  // JSON.stringify escapes U+0000 as the six characters \u0000.
  const escaped = JSON.stringify(mark).slice(1, -1);
  return text.replace(new RegExp(`"${escapeRegExp(escaped)}(-?\\d+|r\\d+)"`, 'g'), (_m, g) => (g[0] === 'r' ? raws[Number(g.slice(1))] : g));
}

const I64_MIN = -(1n << 63n);
const U64_END = 1n << 64n;
const EXACT_HINT =
  'pass plain objects, arrays, strings, finite numbers, bigints in [-2^63, 2^64), booleans and null (a bigger integer as a string)';

/**
 * JSON text that carries `value` exactly, or a TypeError naming the path of
 * what it cannot carry (`result.items[2].price`), ending with a hint:
 * NaN and Infinity (JSON.stringify writes null), a BigInt outside
 * [-2^63, 2^64) (the component reads it as a float), a string or key with a
 * lone surrogate (not UTF-8), a cycle. With `scrub` (for an observation, which
 * the component reads and never returns), a lone surrogate in a string becomes
 * U+FFFD instead, and a BigInt of any size is written as it is.
 */
export function exactStringify(value, root = 'value', { scrub = false } = {}) {
  // A value with nothing to check in it (most results are): as JSON.stringify writes it.
  if (value === null || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value)) || (typeof value === 'string' && value.isWellFormed())) {
    return JSON.stringify(value);
  }
  const paths = new WeakMap();
  const refuse = (path, what) => new TypeError(`${path} ${what}, which JSON cannot carry exactly; ${EXACT_HINT}`);
  const check = (holder, key, v) => {
    const base = paths.get(holder);
    let path = root;
    if (base !== undefined) {
      if (Array.isArray(holder)) path = `${base}[${key}]`;
      else if (!key.isWellFormed()) throw refuse(`a key of ${base}`, 'holds a lone surrogate');
      else path = /^[A-Za-z_$][\w$]*$/.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`;
    }
    if (typeof v === 'number' && !Number.isFinite(v)) throw refuse(path, `is ${v}`);
    if (typeof v === 'bigint' && !scrub && (v < I64_MIN || v >= U64_END)) throw refuse(path, `is the integer ${v}, outside [-2^63, 2^64)`);
    if (typeof v === 'string' && !v.isWellFormed()) {
      if (scrub) return v.toWellFormed();
      throw refuse(path, 'holds a lone surrogate');
    }
    if (v !== null && typeof v === 'object') paths.set(v, path);
    return v;
  };
  try {
    return stringify(value, check);
  } catch (e) {
    if (e instanceof TypeError && e.message.includes(EXACT_HINT)) throw e;
    if (e instanceof TypeError && /circular/i.test(e.message)) throw refuse(root, 'contains itself (a cycle)');
    if (e instanceof RangeError) throw refuse(root, 'is nested too deeply');
    throw e;
  }
}

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * A seed as the decimal string the policy accepts, or undefined.
 * Accepts a bigint, a decimal string, or a safe non-negative integer number.
 */
export function seedText(seed) {
  if (seed === undefined || seed === null) return undefined;
  let big;
  if (typeof seed === 'bigint') big = seed;
  else if (typeof seed === 'string' && /^\s*\d+\s*$/.test(seed)) big = BigInt(seed.trim());
  else if (typeof seed === 'number') {
    if (!Number.isSafeInteger(seed)) {
      throw new PolicyError(
        'invalid_context',
        `seed ${seed} is not a safe integer (above 2^53 a JavaScript number has lost digits); pass the seed as a bigint or a decimal string`,
      );
    }
    big = BigInt(seed);
  } else {
    throw new PolicyError(
      'invalid_context',
      `seed must be a bigint, a decimal string or an integer number, got ${describe(seed)}; pass e.g. 42n or "42"`,
    );
  }
  if (big < 0n || big > U64_MAX) {
    throw new PolicyError(
      'invalid_context',
      `seed ${big} is outside 0..2^64-1; use an unsigned 64-bit integer`,
    );
  }
  return big.toString();
}

/** A short description of a JS value's type, for error messages. */
export function describe(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (v instanceof Uint8Array) return 'bytes';
  return `a ${typeof v}`;
}

/** Symbol under which `parseLossless` keeps each object's members' raw text. */
export const RAW = Symbol('raw JSON text of members');

/**
 * Parse JSON text. Integers beyond 2^53 become BigInt; every object gets a
 * non-enumerable `[RAW]` map from member name to that member's raw text.
 */
export function parseLossless(text) {
  let i = 0;
  const fail = (what) => {
    throw new SyntaxError(`${what} at offset ${i} of JSON text`);
  };
  const ws = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++;
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === '{') return object();
    if (c === '[') return array();
    if (c === '"') return string();
    if (c === 't' && text.startsWith('true', i)) return (i += 4), true;
    if (c === 'f' && text.startsWith('false', i)) return (i += 5), false;
    if (c === 'n' && text.startsWith('null', i)) return (i += 4), null;
    return number();
  };
  const object = () => {
    i++;
    const out = {};
    const raw = {};
    Object.defineProperty(out, RAW, { value: raw, enumerable: false });
    ws();
    if (text[i] === '}') return i++, out;
    for (;;) {
      ws();
      if (text[i] !== '"') fail('expected a member name');
      const key = string();
      ws();
      if (text[i++] !== ':') fail('expected ":"');
      ws();
      const start = i;
      const v = value();
      raw[key] = text.slice(start, i);
      out[key] = v;
      ws();
      const c = text[i++];
      if (c === '}') return out;
      if (c !== ',') fail('expected "," or "}"');
    }
  };
  const array = () => {
    i++;
    const out = [];
    ws();
    if (text[i] === ']') return i++, out;
    for (;;) {
      out.push(value());
      ws();
      const c = text[i++];
      if (c === ']') return out;
      if (c !== ',') fail('expected "," or "]"');
    }
  };
  const string = () => {
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    if (i >= text.length) fail('unterminated string');
    i++;
    return JSON.parse(text.slice(start, i));
  };
  const number = () => {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail('unexpected character');
    i += m[0].length;
    const n = Number(m[0]);
    if (!m[2] && !m[3] && !Number.isSafeInteger(n)) return BigInt(m[0]);
    return n;
  };
  const v = value();
  ws();
  if (i !== text.length) fail('unexpected trailing text');
  return v;
}

// ------------------------------------------------------------------ raw JSON text

/** JSON text to be passed on unchanged (e.g. a scenario's args, so 10.0 stays 10.0). */
export class RawJson {
  constructor(text) {
    this.text = text;
  }
}

/**
 * The index after the JSON value that starts at `i` (the text is valid JSON).
 * A whole object known to start at `at` and be `len` long is jumped over.
 */
function skipValue(t, i, at = -1, len = 0) {
  const c = t.charCodeAt(i);
  if (c === 34) return skipString(t, i);
  const n = t.length;
  if (c === 123 || c === 91) {
    // Count brackets, jumping over strings (which may hold brackets).
    let depth = 0;
    for (; i < n; i++) {
      const d = t.charCodeAt(i);
      if (d === 34) i = skipString(t, i) - 1;
      else if (i === at) {
        // A whole object: the brackets balance over it.
        i += len - 1;
        if (depth === 0) return i + 1;
      } else if (d === 123 || d === 91) depth++;
      else if ((d === 125 || d === 93) && --depth === 0) return i + 1;
    }
    throw new SyntaxError('unterminated container');
  }
  for (; i < n; i++) {
    const d = t.charCodeAt(i);
    if (d === 44 || d === 125 || d === 93 || d === 32 || d === 10 || d === 13 || d === 9) break;
  }
  return i;
}

/** The index after the string that starts at `i`. */
function skipString(t, i) {
  for (;;) {
    const j = t.indexOf('"', i + 1);
    if (j < 0) throw new SyntaxError('unterminated string');
    if (t.charCodeAt(j - 1) !== 92) return j + 1;
    let k = j - 2;
    while (t.charCodeAt(k) === 92) k--;
    if ((j - 1 - k) % 2 === 0) return j + 1;
    i = j;
  }
}

function skipWs(t, i) {
  while (i < t.length) {
    const d = t.charCodeAt(i);
    if (d !== 32 && d !== 10 && d !== 13 && d !== 9) break;
    i++;
  }
  return i;
}

/** [start, end] of each element of a JSON array text. */
export function elementSpans(t) {
  const out = [];
  let i = skipWs(t, 0);
  if (t[i] !== '[') throw new SyntaxError('not an array');
  i = skipWs(t, i + 1);
  if (t[i] === ']') return out;
  for (;;) {
    i = skipWs(t, i);
    const end = skipValue(t, i);
    out.push([i, end]);
    i = skipWs(t, end);
    if (t[i] === ',') i++;
    else if (t[i] === ']') return out;
    else throw new SyntaxError('expected , or ]');
  }
}

/**
 * The raw text of each member of each element of a JSON array text, by name
 * (an element that is not an object: null), in one pass over the text: a
 * batch of effects, whose large members (a journal entry's state) are
 * scanned once. `known`: a JSON object's text likely to be in the batch (a
 * journal entry's state is the state the loop returned with it), found with
 * one search and jumped over. The structure is checked (a SyntaxError), the
 * members' texts are not: parse those you read.
 */
export function elementMembers(t, known = undefined) {
  const out = [];
  const at = known === undefined ? -1 : t.indexOf(known);
  const len = at < 0 ? 0 : known.length;
  let i = skipWs(t, 0);
  if (t.charCodeAt(i) !== 91) throw new SyntaxError('not an array');
  i = skipWs(t, i + 1);
  if (t.charCodeAt(i) === 93) {
    if (skipWs(t, i + 1) !== t.length) throw new SyntaxError('unexpected text after the array');
    return out;
  }
  for (;;) {
    let members = null;
    if (t.charCodeAt(i) === 123) {
      members = {};
      i = skipWs(t, i + 1);
      if (t.charCodeAt(i) === 125) i++;
      else {
        for (;;) {
          if (t.charCodeAt(i) !== 34) throw new SyntaxError('expected a member name');
          const keyEnd = skipString(t, i);
          const name = t.slice(i + 1, keyEnd - 1);
          const key = name.includes('\\') ? JSON.parse(t.slice(i, keyEnd)) : name;
          i = skipWs(t, keyEnd);
          if (t.charCodeAt(i) !== 58) throw new SyntaxError('expected :');
          i = skipWs(t, i + 1);
          const end = skipValue(t, i, at, len);
          if (end === i) throw new SyntaxError('expected a value');
          members[key] = t.slice(i, end);
          i = skipWs(t, end);
          if (t.charCodeAt(i) !== 44) break;
          i = skipWs(t, i + 1);
        }
        if (t.charCodeAt(i) !== 125) throw new SyntaxError('expected , or }');
        i++;
      }
    } else {
      i = skipValue(t, i);
    }
    out.push(members);
    i = skipWs(t, i);
    if (t.charCodeAt(i) === 44) i = skipWs(t, i + 1);
    else if (t.charCodeAt(i) !== 93) throw new SyntaxError('expected , or ]');
    else if (skipWs(t, i + 1) !== t.length) throw new SyntaxError('unexpected text after the array');
    else return out;
  }
}

/** The raw text of each member of a JSON object text, by name. */
export function rawMembers(t) {
  const out = {};
  let i = skipWs(t, 0);
  if (t[i] !== '{') return out;
  i = skipWs(t, i + 1);
  if (t[i] === '}') return out;
  for (;;) {
    i = skipWs(t, i);
    const keyEnd = skipValue(t, i);
    const key = JSON.parse(t.slice(i, keyEnd));
    i = skipWs(t, keyEnd);
    i = skipWs(t, i + 1); // the colon
    const end = skipValue(t, i);
    out[key] = t.slice(i, end);
    i = skipWs(t, end);
    if (t[i] === ',') i++;
    else return out;
  }
}

