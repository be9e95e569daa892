// A framework tool's `execute` through the small door: failures come back to
// the model as data (the envelope rendered `model-tool-result`), and the
// idempotency key is derived from the framework's tool call id, so a tool call
// the framework executes again gets the same key.

import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { PolicyError } from '../errors.js';
import { describe } from '../json.js';
import { recover } from '../recover.js';

/**
 * Wrap `fn(call, input, ...frameworkArgs)` as a framework `execute(input, ...frameworkArgs)`.
 * `callIdOf(frameworkArgs)` reads the framework's tool call id (undefined when it has none).
 */
export function recoverExecute(fn, options, callIdOf, who) {
  if (typeof fn !== 'function') {
    throw new PolicyError('invalid_argument', `${who} wraps a function (call, input, ...) => result, got ${describe(fn)}; pass an (async) function`);
  }
  const o = options ?? {};
  const tool = o.tool ?? (fn.name || 'tool');
  const frame = new AsyncLocalStorage();
  const door = recover((call, input) => fn(call, input, ...frame.getStore()), {
    call: 'tool',
    errors: 'model',
    ...o,
    tool,
    runId: o.runId ?? (() => `${tool}-${callIdOf(frame.getStore()) ?? randomUUID()}`),
  });
  const execute = (input, ...rest) => frame.run(rest, () => door(input));
  Object.defineProperty(execute, 'name', { value: tool });
  return execute;
}
