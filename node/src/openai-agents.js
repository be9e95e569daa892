// agent-recovery/openai-agents: OpenAI Agents JS's own hooks, decided by the policy.
//
//   const agent = new Agent({ ..., modelSettings: { retry: retrySettings() } });
//   tool({ ..., execute: recoverTool(charge, { sideEffect: true }), errorFunction: toolErrorFunction() });
//
// The runner asks `modelSettings.retry.policy` after each failed model request;
// the answer is the component's decision for that failure (its delay, which
// honours Retry-After, or no retry). The OpenAI client's own retries must be off
// (`new OpenAI({ maxRetries: 0 })`): the runner turns them off only from its
// second attempt on.

import { PolicyError, RecoveryError } from './errors.js';
import { describe } from './json.js';
import { fromError } from './observe.js';
import { Policy } from './policy.js';
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
