// agent-recovery/ai-sdk: the Vercel AI SDK (`ai` 7) adapter. See docs/integrations/ai-sdk.md.

import type { LanguageModel, LanguageModelMiddleware, ToolExecutionOptions } from 'ai';
import type { Json, RecoverCall, RecoverOptions } from './index.js';

/** A language model instance (not a model id string). */
export type LanguageModelInstance = Exclude<LanguageModel, string>;

export interface RecoveryMiddlewareOptions
  extends Pick<RecoverOptions, 'policy' | 'store' | 'clock' | 'seed' | 'breaker' | 'policyConfig' | 'timeoutMs' | 'onEvent'> {
  /** Models tried in order after the wrapped one when the policy decides `fallback`, or while a breaker is open. Default []. */
  fallbacks?: LanguageModelInstance[];
  /**
   * 'throw' (default): a stream the policy gave up on rejects with the RecoveryError (the AI SDK
   * reports it as an `error` part and to `onError`). 'part': it ends with one `error` part whose
   * `error` is the envelope rendered as an AG-UI `RUN_ERROR` event, then a `finish` part with
   * finish reason `error`.
   */
  streamErrors?: 'throw' | 'part';
}

/** The defaults of recoveryMiddleware()'s options (every option it accepts is a key). */
export declare const MIDDLEWARE_DEFAULTS: Readonly<Record<keyof RecoveryMiddlewareOptions, unknown>>;

/** A middleware for `wrapLanguageModel`: every doGenerate / doStream goes through the recovery runtime. */
export declare function recoveryMiddleware(options?: RecoveryMiddlewareOptions): LanguageModelMiddleware;

/**
 * A tool `execute` through the small door: `fn(call, input, options)` gets `call.key` (derived from
 * the tool call id); a failure resolves as the envelope rendered `model-tool-result` (errors as data).
 */
export declare function recoverTool<I, T>(
  fn: (call: RecoverCall, input: I, options: ToolExecutionOptions<unknown>) => Promise<T | Response> | T | Response,
  options?: Omit<RecoverOptions, 'errors' | 'fallbacks' | 'target'>,
): (input: I, options: ToolExecutionOptions<unknown>) => Promise<T | Json>;
