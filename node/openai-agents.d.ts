// agent-recovery/openai-agents: the OpenAI Agents JS (`@openai/agents`) adapter. See docs/integrations/openai-agents-js.md.

import type { Model, ModelRetrySettings, RetryPolicy, RunContext } from '@openai/agents';

/** What the runner passes as the third argument of a tool's execute (the part read here). */
export interface ToolCallDetails {
  toolCall?: { callId?: string };
}
import type { Json, Policy, PolicyConfig, RecoverCall, RecoverOptions } from './index.js';

export interface AgentsAdapterOptions {
  /** Default: the reference policy, loaded at the first call. */
  policy?: Policy;
  /** Makes the jitter of the decided delays reproducible. */
  seed?: number | string;
  /** Overrides of the policy's parameters (e.g. `{ llm: { max_attempts: 5 } }`), passed as the decision context's `config`. */
  policyConfig?: PolicyConfig;
}

/** The ceiling handed to the runner as `maxRetries`; the policy's own limit stops first. */
export declare const MAX_RETRIES: number;

/** A `RetryPolicy`: retry when the policy decides `retry`, after its `delay_ms` (which honours Retry-After). */
export declare function retryPolicy(options?: AgentsAdapterOptions): RetryPolicy;

/** `modelSettings.retry`: `{ maxRetries: MAX_RETRIES, policy: retryPolicy(options) }`. */
export declare function retrySettings(options?: AgentsAdapterOptions): ModelRetrySettings;

/** A tool `errorFunction`: the failure as the envelope rendered `model-tool-result` (JSON text). */
export declare function toolErrorFunction(options?: Pick<AgentsAdapterOptions, 'policy'>): (context: RunContext<unknown>, error: unknown) => Promise<string>;

/**
 * A tool `execute` through the small door: `fn(call, input, runContext, details)` gets `call.key`
 * (derived from the tool call id); a failure resolves as the envelope rendered `model-tool-result`.
 */
export declare function recoverTool<I, T>(
  fn: (call: RecoverCall, input: I, runContext?: RunContext<unknown>, details?: ToolCallDetails) => Promise<T | Response> | T | Response,
  options?: Omit<RecoverOptions, 'errors' | 'fallbacks' | 'target'>,
): (input: I, runContext?: RunContext<unknown>, details?: ToolCallDetails) => Promise<T | Json>;

/**
 * A `Model` over a chain of models named in order (the first is the primary): each request goes
 * through the small door (retries after the policy's delay, a fallback chain, breakers). A stream is
 * recovered until its first event. Leave `modelSettings.retry` unset with it.
 */
export declare function recoveringModel(
  models: Record<string, Model>,
  options?: Pick<RecoverOptions, 'policy' | 'store' | 'clock' | 'seed' | 'breaker' | 'policyConfig' | 'timeoutMs' | 'onEvent'>,
): Model;
