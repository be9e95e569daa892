// recover(): the small door. Wraps one call or one tool in the recovery
// Runtime, one run of one step per call; the loop is the component's, this
// file decides nothing.
//
//   const chat = recover(async (call, messages) =>
//     openai.chat.completions.create({ model: call.target, messages }, { headers: { 'Idempotency-Key': call.key } }),
//     { call: 'llm', target: 'gpt-4o', fallbacks: ['gpt-4o-mini'] });
//   const answer = await chat(messages);

import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { PolicyError, RecoveryError } from './errors.js';
import { describe } from './json.js';
import { Policy } from './policy.js';
import { Runtime } from './runtime.js';
import { MemoryStore } from './store.js';

/** The options of recover(), with their defaults (see index.d.ts, RecoverOptions). */
export const RECOVER_DEFAULTS = Object.freeze({
  policy: undefined, // the reference policy
  store: undefined, // a MemoryStore per wrapped function: its breakers outlive a call
  clock: undefined, // SystemClock
  seed: undefined,
  call: undefined, // 'tool' | 'llm' | 'agent'; undefined: read from each observation
  tool: undefined, // the function's name, else 'operation'
  target: undefined, // the tool name
  fallbacks: Object.freeze([]),
  sideEffect: false,
  idempotent: undefined,
  runId: undefined, // a new id per call: `${tool}-${uuid}`; a string or a function returning one
  stepId: undefined, // the tool name
  errors: 'throw', // or 'model': resolve with the failure rendered as a model tool result
  timeoutMs: undefined,
  policyConfig: undefined,
  breaker: undefined, // the policy's thresholds
  onEvent: undefined,
});

const bad = (m) => new PolicyError('invalid_argument', m);
/** The call in progress: where the door's decider notes its decisions (one runtime serves every call). */
const current = new AsyncLocalStorage();
const warned = new WeakSet();

/**
 * Wrap `fn(call, ...args)` in the recovery runtime; returns `async (...args) => result`.
 * `call` carries `key` (the idempotency key, the same on every attempt and
 * target: send it to the service), `target`, `attempt` and `signal`.
 * @param {(call: object, ...args: any[]) => any} fn
 * @param {object} [options] see index.d.ts (RecoverOptions)
 */
export function recover(fn, options = {}) {
  if (typeof fn !== 'function') throw bad(`recover() wraps a function, got ${describe(fn)}; pass an (async) function`);
  if (options === null || typeof options !== 'object') throw bad(`recover() options must be an object, got ${describe(options)}`);
  for (const k of Object.keys(options)) {
    if (!(k in RECOVER_DEFAULTS)) {
      throw bad(`recover() has no option ${JSON.stringify(k)}; the options are ${Object.keys(RECOVER_DEFAULTS).join(', ')}`);
    }
  }
  const o = { ...RECOVER_DEFAULTS, ...options };
  if (o.errors !== 'throw' && o.errors !== 'model') throw bad(`errors is 'throw' or 'model', got ${JSON.stringify(o.errors)}`);
  if (!Array.isArray(o.fallbacks) || !o.fallbacks.every((t) => typeof t === 'string')) {
    throw bad(`fallbacks is an array of target names, got ${describe(o.fallbacks)}`);
  }
  if (o.policy !== undefined && !(o.policy instanceof Policy)) throw bad('policy must be a Policy (`await Policy.load()`)');
  const tool = o.tool ?? (fn.name || 'operation');
  const store = o.store ?? new MemoryStore();
  let runtime; // a promise of the door's runtime, made at its first call

  const runtimeOf = () => {
    runtime ??= (async () => {
      const policy = o.policy ?? (await Policy.load());
      const decider = {
        decideJson(observation, ctx) {
          const text = policy.decideJson(observation, ctx);
          const call = current.getStore();
          if (call !== undefined) call.last = text;
          return text;
        },
      };
      const rt = await Runtime.create({
        policy: decider,
        store,
        ...(o.clock === undefined ? {} : { clock: o.clock }),
        ...(o.seed === undefined ? {} : { seed: o.seed }),
        ...(o.timeoutMs === undefined ? {} : { attemptTimeoutMs: o.timeoutMs }),
        ...(o.policyConfig === undefined ? {} : { policyConfig: o.policyConfig }),
        ...(o.breaker === undefined ? {} : { breaker: o.breaker }),
        ...(o.onEvent === undefined ? {} : { onEvent: o.onEvent }),
      });
      return { rt, policy };
    })().catch((e) => {
      runtime = undefined;
      throw e;
    });
    return runtime;
  };

  const recovered = async (...args) => {
    const { rt, policy } = await runtimeOf();
    const state = { last: undefined }; // this call's last decision (JSON text)
    let cause; // what the last attempt threw
    let returned; // what the last attempt returned (a response the component judged a failure)
    let keyRead = false;
    const runId = typeof o.runId === 'function' ? String(o.runId()) : (o.runId ?? `${tool}-${randomUUID()}`);
    const run = rt.run(runId);
    const report = await current.run(state, () => run.step({
      id: o.stepId ?? tool,
      tool,
      args: argsOf(args),
      ...(o.call === undefined ? {} : { call: o.call }),
      ...(o.target === undefined ? {} : { target: o.target }),
      fallbacks: o.fallbacks,
      sideEffect: o.sideEffect,
      ...(o.idempotent === undefined ? {} : { idempotent: o.idempotent }),
      operation: async (c) => {
        const call = {
          get key() {
            keyRead = true;
            return c.key;
          },
          target: c.target,
          attempt: c.attempt,
          signal: c.signal,
          timeoutMs: c.timeoutMs,
        };
        try {
          returned = await fn(call, ...args);
          cause = undefined;
          return returned;
        } catch (e) {
          cause = e;
          throw e;
        } finally {
          if (o.sideEffect && !keyRead && o.idempotent !== true && !warned.has(recovered)) {
            warned.add(recovered);
            process.emitWarning(
              `recover(${tool}): a step with side effects did not read call.key, so a retried attempt may be applied twice; ` +
                'send call.key to the service as its idempotency key, or pass idempotent: true when repeating it is harmless',
              { type: 'KeyNotUsedWarning', code: 'AGENT_RECOVERY_KEY_NOT_USED' },
            );
          }
        }
      },
    }));
    if (report.outcome === 'ok') {
      await run.end();
      return report.value !== undefined ? report.value : report.result;
    }
    if (o.errors === 'model') {
      return report.rendered ?? policy.render(report.envelope ?? { code: `runtime.${report.outcome}` }, 'model-tool-result');
    }
    const last = state.last === undefined ? undefined : JSON.parse(state.last);
    if (last !== undefined) {
      const d = policy.describe();
      last.policy = { name: d.name, version: d.version, sha256: d.sha256 };
    }
    const decision =
      last !== undefined && last.action !== 'retry'
        ? last
        : { action: report.outcome, attempt: 0, reason: report.outcome, envelope: report.envelope ?? { code: `runtime.${report.outcome}` } };
    throw new RecoveryError({ decision, attempts: decision.attempt, cause, result: cause === undefined ? returned : undefined });
  };
  Object.defineProperty(recovered, 'name', { value: tool });
  return recovered;
}

/** The call's arguments as JSON (part of the key and of a dead-letter record); what JSON cannot carry is left out. */
function argsOf(args) {
  try {
    return JSON.parse(JSON.stringify(args)) ?? null;
  } catch {
    return null;
  }
}
