// The worker-thread side of `Policy.load(source, {isolate: 'worker'})`: loads
// the component in-process *in this thread* and answers one call at a time.
// Messages in: {id, method, args}; out: {id, value} or {id, error}. The main
// thread (isolated.js) owns the deadline and terminates this thread when a
// call overruns it.

import { parentPort, workerData } from 'node:worker_threads';
import { Policy } from './policy.js';

const METHODS = new Set([
  'describe',
  'info',
  'smokeTests',
  'classifyJson',
  'decideJson',
  'classify',
  'decide',
  'backoff',
  'key',
  'registry',
  'registryJson',
  'lookup',
  'errorsBlock',
  'renderJson',
  'render',
]);

/** An error as plain data the main thread turns back into the same class. */
function errorData(e) {
  return {
    name: e?.name ?? 'Error',
    message: String(e?.message ?? e),
    code: e?.code,
    kind: e?.kind,
    reason: e?.reason,
  };
}

let policy;
try {
  const { source, options } = workerData;
  policy = await Policy.load(source, options);
  parentPort.postMessage({ id: 0, value: policy.describe() });
} catch (e) {
  parentPort.postMessage({ id: 0, error: errorData(e) });
}

parentPort.on('message', ({ id, method, args }) => {
  try {
    if (!METHODS.has(method)) throw new TypeError(`unknown method ${method}`);
    parentPort.postMessage({ id, value: policy[method](...args) });
  } catch (e) {
    parentPort.postMessage({ id, error: errorData(e) });
  }
});
