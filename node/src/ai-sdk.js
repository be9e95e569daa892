// agent-recovery/ai-sdk: the Vercel AI SDK's own hooks through the small door.
//
//   const model = wrapLanguageModel({ model: openai('gpt-4o'), middleware: recoveryMiddleware({ fallbacks: [openai('gpt-4o-mini')] }) });
//   await generateText({ model, prompt, maxRetries: 0 });
//
// The middleware runs each doGenerate / doStream as one step of the recovery
// runtime (the component decides; Retry-After is honoured; a fallback decision
// moves to the next model; a model whose breaker is open is skipped while it
// stays open). A RecoveryError is not an APICallError, so the AI SDK never
// retries what the policy gave up on; `maxRetries: 0` turns off its retries of
// what reaches it otherwise.

import { PolicyError, RecoveryError } from './errors.js';
import { describe } from './json.js';
import { Policy } from './policy.js';
import { recover } from './recover.js';
import { MemoryStore } from './store.js';
import { recoverExecute } from './adapters/execute.js';

/** The options of recoveryMiddleware(), with their defaults (see ai-sdk.d.ts). */
export const MIDDLEWARE_DEFAULTS = Object.freeze({
  fallbacks: Object.freeze([]), // LanguageModel instances, tried in order after the wrapped one
  policy: undefined, // the reference policy
  store: undefined, // a MemoryStore per middleware: breakers outlive a call
  clock: undefined,
  seed: undefined,
  breaker: undefined,
  policyConfig: undefined,
  timeoutMs: undefined,
  onEvent: undefined,
  streamErrors: 'throw', // or 'part': a stream that recovery gave up on ends with an error part (AG-UI RUN_ERROR)
});

const bad = (m) => new PolicyError('invalid_argument', m);

/**
 * A LanguageModelV4 middleware (`specificationVersion: 'v4'`) for `wrapLanguageModel`.
 * @param {object} [options] see ai-sdk.d.ts (RecoveryMiddlewareOptions)
 */
export function recoveryMiddleware(options = {}) {
  if (options === null || typeof options !== 'object') throw bad(`recoveryMiddleware() options must be an object, got ${describe(options)}`);
  for (const k of Object.keys(options)) {
    if (!(k in MIDDLEWARE_DEFAULTS)) {
      throw bad(`recoveryMiddleware() has no option ${JSON.stringify(k)}; the options are ${Object.keys(MIDDLEWARE_DEFAULTS).join(', ')}`);
    }
  }
  const o = { ...MIDDLEWARE_DEFAULTS, ...options };
  if (!Array.isArray(o.fallbacks) || !o.fallbacks.every((m) => typeof m?.modelId === 'string' && typeof m.doGenerate === 'function')) {
    throw bad(`fallbacks is an array of language models (e.g. [openai('gpt-4o-mini')]), got ${describe(o.fallbacks)}`);
  }
  if (o.streamErrors !== 'throw' && o.streamErrors !== 'part') throw bad(`streamErrors is 'throw' or 'part', got ${JSON.stringify(o.streamErrors)}`);
  const store = o.store ?? new MemoryStore();
  let policy; // a promise of the policy, loaded at the first call
  const doors = new Map(); // wrapped model id -> its door

  const doorOf = async (model) => {
    policy ??= o.policy !== undefined ? Promise.resolve(o.policy) : Policy.load();
    const p = await policy;
    let door = doors.get(model.modelId);
    if (door === undefined) {
      const chain = [model, ...o.fallbacks];
      const ids = chain.map((m) => m.modelId);
      const dup = ids.find((id, i) => ids.indexOf(id) !== i);
      if (dup !== undefined) throw bad(`the model ${JSON.stringify(dup)} is twice in the chain [${ids.join(', ')}]; list each fallback once`);
      door = recover(async (call, attempt) => attempt(call.target), {
        call: 'llm',
        tool: 'model',
        target: model.modelId,
        fallbacks: ids.slice(1),
        policy: p,
        store,
        ...pick(o, ['clock', 'seed', 'breaker', 'policyConfig', 'timeoutMs', 'onEvent']),
      });
      doors.set(model.modelId, door);
    }
    return { door, policy: p, byId: new Map(o.fallbacks.map((m) => [m.modelId, m])) };
  };

  return {
    specificationVersion: 'v4',
    async wrapGenerate({ doGenerate, params, model }) {
      const { door, byId } = await doorOf(model);
      return door((target) => (target === model.modelId ? doGenerate() : byId.get(target).doGenerate(params)));
    },
    async wrapStream({ doStream, params, model }) {
      const { door, byId, policy: p } = await doorOf(model);
      try {
        return await door((target) => (target === model.modelId ? doStream() : byId.get(target).doStream(params)));
      } catch (e) {
        if (o.streamErrors !== 'part' || !(e instanceof RecoveryError)) throw e;
        return { stream: errorStream(p.render(e.envelope, 'ag-ui-run-error'), e.envelope.code) };
      }
    },
  };
}

/**
 * A tool `execute` through the small door: `fn(call, input, options)` gets
 * `call.key` (the idempotency key, derived from the tool call id) and a
 * failure is returned to the model as data (`model-tool-result`).
 * @param {(call: object, input: any, options: object) => any} fn
 * @param {object} [options] recover() options (see index.d.ts, RecoverOptions)
 */
export function recoverTool(fn, options) {
  return recoverExecute(fn, options, (rest) => rest[0]?.toolCallId, 'recoverTool()');
}

/** A stream that carries one error part (the AG-UI RUN_ERROR event) and a finish part whose reason is `error`. */
function errorStream(event, code) {
  const none = { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined };
  const parts = [
    { type: 'stream-start', warnings: [] },
    { type: 'error', error: event },
    {
      type: 'finish',
      finishReason: { unified: 'error', raw: code },
      usage: { inputTokens: none, outputTokens: { total: undefined, text: undefined, reasoning: undefined } },
    },
  ];
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(part);
      controller.close();
    },
  });
}

function pick(o, keys) {
  return Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]]));
}
