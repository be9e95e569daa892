// agent-recovery/a2a: A2A adapters for @a2a-js/sdk (1.x). A failed task that
// says whether and when to retry, and cancelling a run's sub-agent tasks with
// it. Nothing here decides: the policy classifies and decides, its renders
// give the wire shapes (docs/integrations/a2a.md).

import { describe } from './json.js';
import { fromError } from './observe.js';
import { PolicyError } from './errors.js';
import { Policy } from './policy.js';

// A2A task states no message can change (A2A 1.0 TaskState: COMPLETED 3,
// FAILED 4, CANCELED 5, REJECTED 7), and the state names of the proto enum.
const TERMINAL = new Set([3, 4, 5, 7]);
const STATE = { submitted: 1, working: 2, completed: 3, failed: 4, canceled: 5, 'input-required': 6, rejected: 7, 'auth-required': 8 };
const ROLE_AGENT = 2;

/**
 * A TaskStatusUpdateEvent (the @a2a-js/sdk shape) ending the task with the
 * policy's answer to `error`: the state the `a2a-task-status` render names, a
 * text part, and a data part `{error: envelope, retryable, retryAfter}` with
 * `retryable` / `retryAfter` as the `jsonrpc-error` render puts them in `error.data`.
 */
export async function failedStatus(error, { taskId, contextId, policy } = {}) {
  const p = policy ?? (await Policy.load());
  const decision = p.decide(fromError(error, { call: 'agent' }), { call: 'agent', attempt: 1 });
  const task = p.render(decision.envelope, 'a2a-task-status', { task_id: taskId, context_id: contextId });
  const data = p.render(decision.envelope, 'jsonrpc-error').error.data;
  const extra = Object.fromEntries(['retryable', 'retryAfter'].filter((k) => k in data).map((k) => [k, data[k]]));
  const rendered = task.status.message;
  const parts = rendered.parts.map((part) =>
    'text' in part
      ? { content: { $case: 'text', value: part.text }, metadata: undefined, filename: '', mediaType: '' }
      : { content: { $case: 'data', value: { ...part.data, ...extra } }, metadata: undefined, filename: '', mediaType: '' },
  );
  return {
    taskId,
    contextId,
    status: {
      state: STATE[task.status.state],
      message: { messageId: rendered.messageId, contextId, taskId, role: ROLE_AGENT, parts, metadata: undefined, extensions: [], referenceTaskIds: [] },
      timestamp: new Date().toISOString(),
    },
    metadata: undefined,
  };
}

/** An AgentExecutor whose failures end the task with the policy's answer (failedStatus). */
export class RecoveringExecutor {
  #inner;
  #policy;

  constructor(executor, { policy } = {}) {
    if (typeof executor?.execute !== 'function') throw new PolicyError('invalid_argument', `RecoveringExecutor wraps an AgentExecutor, got ${describe(executor)}`);
    this.#inner = executor;
    this.#policy = policy;
  }

  async execute(requestContext, eventBus) {
    let published = requestContext.task !== undefined;
    const watch = (event) => {
      if (event?.kind === 'task') published = true;
    };
    eventBus.on('event', watch);
    try {
      await this.#inner.execute(requestContext, eventBus);
    } catch (e) {
      const { taskId, contextId } = requestContext;
      if (!published) {
        eventBus.publish({ kind: 'task', data: { id: taskId, contextId, status: { state: STATE.submitted, message: undefined, timestamp: undefined }, artifacts: [], history: [], metadata: undefined } });
      }
      eventBus.publish({ kind: 'statusUpdate', data: await failedStatus(e, { taskId, contextId, policy: this.#policy }) });
      eventBus.finished();
    } finally {
      eventBus.off('event', watch);
    }
  }

  cancelTask(taskId, eventBus) {
    return this.#inner.cancelTask(taskId, eventBus);
  }
}

/** The task id a StreamResponse (or a bare Task / update) is about, and its numeric state. */
function taskOf(event) {
  const inner = event?.payload?.value ?? event;
  const kind = event?.payload?.$case;
  if (kind === 'task' || (kind === undefined && inner?.id !== undefined && inner?.status !== undefined)) return [inner.id, inner.status?.state];
  if (kind === 'statusUpdate') return [inner.taskId, inner.status?.state];
  return [inner?.taskId || undefined, undefined];
}

/**
 * The A2A tasks a run has in flight through `client` (an @a2a-js/sdk Client).
 * `inFlight`: the ids of the tasks seen and not in a terminal state.
 * `cancels`: one record per cancel sent, `{taskId, ok: true, state}` or
 * `{taskId, ok: false, envelope}` (a TaskNotCancelableError is recorded, never thrown).
 */
export class A2ATasks {
  #policy;

  constructor(client, { policy } = {}) {
    this.client = client;
    this.#policy = policy;
    this.inFlight = new Set();
    this.cancels = [];
  }

  /** `client.sendMessageStream(params, options)`, noting its tasks; when `options.signal` aborts, each task in flight gets a cancel. */
  async *sendMessageStream(params, options = {}) {
    try {
      for await (const event of this.client.sendMessageStream(params, options)) {
        const [id, state] = taskOf(event);
        if (id) {
          if (TERMINAL.has(state)) this.inFlight.delete(id);
          else this.inFlight.add(id);
        }
        yield event;
      }
    } catch (e) {
      if (options.signal?.aborted) await this.cancelAll();
      throw e;
    }
  }

  /** Send a cancel for every task in flight; resolves with this round's records. */
  async cancelAll() {
    const done = [];
    for (const taskId of [...this.inFlight]) {
      this.inFlight.delete(taskId);
      try {
        const task = await this.client.cancelTask({ id: taskId });
        done.push({ taskId, ok: true, state: task.status?.state });
      } catch (e) {
        const p = this.#policy ?? (await Policy.load());
        done.push({ taskId, ok: false, envelope: p.classify(fromError(e, { call: 'agent' })) });
      }
    }
    this.cancels.push(...done);
    return done;
  }
}
