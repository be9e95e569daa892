// fromError on odd errors: it never throws, and copies a bounded amount. The
// errors here are plain objects and Errors written to be awkward (throwing
// getters, bytes and oversized bodies, cycles, deep and wide `errors`); they
// imitate no SDK. The bounds are exception.js's documented ones.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_EXCEPTION_BODY_CHARS, MAX_MEMBERS } from '../src/exception.js';
import { fromError } from '../src/index.js';
import { MAX_DEPTH } from '../src/sdk.js';

/** An error carrying a response without a status (so it stays an `exception`). */
function carrier(fields) {
  return Object.assign(new Error('carrier'), fields);
}

test('headers are lower-cased strings, bodies parsed when JSON', () => {
  const headers = new Headers({ 'Retry-After': '7' });
  const obs = fromError(carrier({ responseHeaders: headers, responseBody: '{"error":"busy"}', isRetryable: false }));
  assert.deepEqual(obs, {
    source: 'exception',
    type: 'Error',
    message: 'carrier',
    headers: { 'retry-after': '7' },
    body: { error: 'busy' },
    retryable: false,
  });
  assert.deepEqual(fromError(carrier({ responseHeaders: { 'X-Count': 3, 'Set-Cookie': ['a', 'b'] } })).headers, {
    'x-count': '3',
    'set-cookie': 'a, b',
  });
});

test('bodies that are not JSON, bytes, or too large', () => {
  assert.equal(fromError(carrier({ responseBody: '<html>bad gateway</html>' })).body, '<html>bad gateway</html>');
  assert.deepEqual(fromError(carrier({ responseBody: new TextEncoder().encode('{"a":1}') })).body, { a: 1 });
  const huge = `{"error":"${'x'.repeat(2 * MAX_EXCEPTION_BODY_CHARS)}"}`;
  assert.equal(fromError(carrier({ responseBody: huge })).body, huge.slice(0, MAX_EXCEPTION_BODY_CHARS));
  assert.equal(fromError(carrier({ body: { n: NaN } })).body, undefined);
  assert.equal(fromError(carrier({ body: { items: Array(2000).fill('y') } })).body, undefined);
  assert.equal(fromError(carrier({ body: new Map([['a', 1]]) })).body, undefined);
});

test('throwing getters are skipped, the rest is read', () => {
  const err = new Error('hostile', { cause: new RangeError('inner') });
  for (const k of ['responseHeaders', 'responseBody', 'isRetryable', 'errors']) {
    Object.defineProperty(err, k, {
      get() {
        throw new Error('no');
      },
    });
  }
  assert.deepEqual(fromError(err), {
    source: 'exception',
    type: 'Error',
    message: 'hostile',
    cause: { source: 'exception', type: 'RangeError', message: 'inner' },
  });
});

test('cycles are cut and depth is bounded', () => {
  const a = new Error('a');
  const b = new Error('b', { cause: a });
  a.cause = b;
  const obs = fromError(a);
  assert.equal(obs.cause.message, 'b');
  assert.equal(obs.cause.cause, undefined);

  let deep = new Error('root');
  for (let i = 0; i < 50; i++) deep = new Error(`level ${i}`, { cause: deep });
  let o = fromError(deep);
  let levels = 1;
  while (o.cause) {
    o = o.cause;
    levels++;
  }
  assert.equal(levels, MAX_DEPTH + 1); // the error and MAX_DEPTH levels below it
});

test('members are bounded: the first ones and the last', () => {
  const errors = Array.from({ length: 40 }, (_, i) => new Error(String(i)));
  const obs = fromError(new AggregateError(errors, 'many'));
  assert.equal(obs.exceptions.length, MAX_MEMBERS);
  const expected = [...Array.from({ length: MAX_MEMBERS - 1 }, (_, i) => String(i)), '39'];
  assert.deepEqual(
    obs.exceptions.map((m) => m.message),
    expected,
  );
  const self = new AggregateError([], 'self');
  self.errors.push(self);
  assert.equal(fromError(self).exceptions, undefined);
});

test('a revoked proxy and a thrown non-error still give an observation', () => {
  const { proxy, revoke } = Proxy.revocable(new Error('x'), {});
  revoke();
  assert.equal(fromError(proxy).source, 'exception');
  assert.deepEqual(fromError(new Error('wrapper', { cause: 42 })).cause, { source: 'exception', type: 'Error', message: '42' });
});
