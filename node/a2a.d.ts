// Types of `agent-recovery/a2a` (hand-written; src/a2a.js). The A2A SDK
// (@a2a-js/sdk 1.x) is not a dependency: its objects are typed by the members used here.

import type { Envelope, Policy } from 'agent-recovery';

/** A TaskStatusUpdateEvent in the @a2a-js/sdk shape. */
export interface A2AStatusUpdate {
  taskId: string;
  contextId: string;
  status: { state: number; message: unknown; timestamp: string | undefined };
  metadata: undefined;
}

/**
 * The status update ending a task with the policy's answer to `error`: a text part and a data
 * part `{error: envelope, retryable, retryAfter}` (seconds).
 */
export declare function failedStatus(error: unknown, options: { taskId: string; contextId: string; policy?: Policy }): Promise<A2AStatusUpdate>;

/** What RecoveringExecutor runs: an @a2a-js/sdk AgentExecutor. */
export interface AgentExecutorLike {
  execute(requestContext: any, eventBus: any): Promise<void>;
  cancelTask(taskId: string, eventBus: any): Promise<void>;
}

/** An AgentExecutor whose failures end the task with the policy's answer (failedStatus). */
export declare class RecoveringExecutor implements AgentExecutorLike {
  constructor(executor: AgentExecutorLike, options?: { policy?: Policy });
  execute(requestContext: any, eventBus: any): Promise<void>;
  cancelTask(taskId: string, eventBus: any): Promise<void>;
}

/** What A2ATasks calls: the @a2a-js/sdk Client. */
export interface A2AClientLike {
  sendMessageStream(params: any, options?: { signal?: AbortSignal; [key: string]: unknown }): AsyncIterable<any>;
  cancelTask(params: { id: string }, options?: unknown): Promise<{ status?: { state: number } }>;
}

/** One cancel sent: the task's new state, or the policy's envelope of the refusal or failure. */
export type CancelRecord = { taskId: string; ok: true; state: number | undefined } | { taskId: string; ok: false; envelope: Envelope };

/** The A2A tasks a run has in flight; aborting the stream's signal cancels each of them. */
export declare class A2ATasks<C extends A2AClientLike = A2AClientLike> {
  constructor(client: C, options?: { policy?: Policy });
  client: C;
  /** The ids of the tasks seen and not in a terminal state. */
  inFlight: Set<string>;
  /** One record per cancel sent. */
  cancels: CancelRecord[];
  /** `client.sendMessageStream(params, options)`, noting its tasks. */
  sendMessageStream(params: unknown, options?: { signal?: AbortSignal; [key: string]: unknown }): AsyncGenerator<any, void, undefined>;
  /** Send a cancel for every task in flight; resolves with this round's records. */
  cancelAll(): Promise<CancelRecord[]>;
}
