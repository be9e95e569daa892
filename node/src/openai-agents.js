// agent-recovery/openai-agents: OpenAI Agents JS's own hooks, decided by the policy.
//
//   const agent = new Agent({ ..., modelSettings: { retry: retrySettings() } });
//   tool({ ..., execute: recoverTool(charge, { sideEffect: true }), errorFunction: toolErrorFunction() });
//
// The runner asks `modelSettings.retry.policy` after each failed model request;
// the answer is the component's decision for that failure (its delay, which
// honours Retry-After, or no retry). The OpenAI client's own retries must be off
// (`new OpenAI({ maxRetries: 0 })`): the runner turns them off only from its
// second attempt on. recoveringModel() is the other way: a Model whose requests
// go through the small door (retries, a fallback chain, breakers), with the
// runner's own retries left off (its default).

import { AsyncLocalStorage } from 'node:async_hooks';
import { PolicyError, RecoveryError } from './errors.js';
import { describe } from './json.js';
import { fromError } from './observe.js';
import { Policy } from './policy.js';
import { recover } from './recover.js';
import { recoverExecute } from './adapters/execute.js';

/** The ceiling handed to the runner as `maxRetries`: the policy's own limit stops first. */
export const MAX_RETRIES = 100;

const bad = (m) => new PolicyError('invalid_argument', m);

function policyOf(options, who, allowed) {
  if (options === null || typeof options !== 'object') throw bad(`${who} options must be an object, got ${describe(options)}`);
  for (const k of Object.keys(options)) {
    if (!allowed.includes(k)) throw bad(`${who} has no option ${JSON.stringify(k)}; the options are ${allowed.join(', ')}`);
  }
  if (options.policy !== undefined && !(options.policy instanceof Policy)) throw bad(`${who}: policy must be a Policy (\`await Policy.load()\`)`);
  let loaded;
  return () => (loaded ??= options.policy !== undefined ? Promise.resolve(options.policy) : Policy.load());
}

/**
 * A `RetryPolicy` for `modelSettings.retry.policy`: retry when the policy's
 * decision is `retry`, after its `delay_ms`.
 * @param {{policy?: Policy, seed?: number|string, policyConfig?: object}} [options]
 */
export function retryPolicy(options = {}) {
  const load = policyOf(options, 'retryPolicy()', ['policy', 'seed', 'policyConfig']);
  return async (context) => {
    const policy = await load();
    const observation = fromError(context.error, { call: 'llm' });
    const decision = policy.decide(observation, {
      call: 'llm',
      attempt: context.attempt,
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      ...(options.policyConfig === undefined ? {} : { config: options.policyConfig }),
    });
    const reason = `${decision.action}: ${decision.envelope.code} (${decision.reason})`;
    return decision.action === 'retry' ? { retry: true, delayMs: decision.delay_ms ?? 0, reason } : { retry: false, reason };
  };
}

/**
 * `modelSettings.retry`: the policy decides every retry (`maxRetries` is only a
 * ceiling, see MAX_RETRIES).
 * @param {{policy?: Policy, seed?: number|string, policyConfig?: object}} [options]
 */
export function retrySettings(options = {}) {
  return { maxRetries: MAX_RETRIES, policy: retryPolicy(options) };
}

/**
 * A tool `errorFunction`: the failure as the model should read it, the
 * envelope rendered `model-tool-result` (JSON text).
 * @param {{policy?: Policy}} [options]
 */
export function toolErrorFunction(options = {}) {
  const load = policyOf(options, 'toolErrorFunction()', ['policy']);
  return async (_context, error) => {
    const policy = await load();
    const envelope = error instanceof RecoveryError ? error.envelope : policy.classify(fromError(error, { call: 'tool' }));
    return JSON.stringify(policy.render(envelope, 'model-tool-result'));
  };
}

/**
 * A tool `execute` through the small door: `fn(call, input, runContext, details)`
 * gets `call.key` (derived from the tool call id) and a failure is returned to
 * the model as data (`model-tool-result`).
 * @param {(call: object, input: any, runContext?: object, details?: object) => any} fn
 * @param {object} [options] recover() options (see index.d.ts, RecoverOptions)
 */
export function recoverTool(fn, options) {
  return recoverExecute(fn, options, (rest) => rest[1]?.toolCall?.callId, 'recoverTool()');
}

/** The options recoveringModel() passes on to recover(). */
const MODEL_OPTIONS = ['policy', 'store', 'clock', 'seed', 'breaker', 'policyConfig', 'timeoutMs', 'onEvent'];

/**
 * A `Model` over a chain of models, named in order (the first is the primary):
 * each request goes through the small door, so it is retried after the policy's
 * delay, moves to the next model on a `fallback` decision, and skips a model
 * whose breaker is open. A stream is recovered until its first event; after
 * that an error passes through (its output may already have been used).
 * Leave `modelSettings.retry` unset with it (one retry layer).
 * @param {Record<string, object>} models e.g. `{ 'gpt-4o': modelA, 'gpt-4o-mini': modelB }`
 * @param {object} [options] recover() options: policy, store, clock, seed, breaker, policyConfig, timeoutMs, onEvent
 */
export function recoveringModel(models, options = {}) {
  const names = models !== null && typeof models === 'object' ? Object.keys(models) : [];
  if (names.length === 0 || !names.every((n) => typeof models[n]?.getResponse === 'function')) {
    throw bad(`recoveringModel() takes the models by name, e.g. { 'gpt-4o': model, 'gpt-4o-mini': fallback }, got ${describe(models)}`);
  }
  if (options === null || typeof options !== 'object') throw bad(`recoveringModel() options must be an object, got ${describe(options)}`);
  for (const k of Object.keys(options)) {
    if (!MODEL_OPTIONS.includes(k)) throw bad(`recoveringModel() has no option ${JSON.stringify(k)}; the options are ${MODEL_OPTIONS.join(', ')}`);
  }
  const request = new AsyncLocalStorage();
  const common = { call: 'llm', tool: 'model', target: names[0], fallbacks: names.slice(1), ...options };
  const respond = recover((call) => models[call.target].getResponse(request.getStore()), common);
  const open = recover(async (call) => {
    const it = models[call.target].getStreamedResponse(request.getStore())[Symbol.asyncIterator]();
    return new OpenedStream(it, await it.next());
  }, common);
  return {
    getResponse: (req) => request.run(req, () => respond()),
    async *getStreamedResponse(req) {
      const { it, first } = await request.run(req, () => open());
      for (let next = first; !next.done; next = await it.next()) yield next.value;
    },
  };
}

/** A stream whose first event arrived (what the door's stream operation returns). */
class OpenedStream {
  constructor(it, first) {
    this.it = it;
    this.first = first;
  }
}
