// The A2A agents the tests serve with the real @a2a-js/sdk: an agent card for
// a URL, an executor whose backend answers 503 with `Retry-After: 3`, one
// that works until its task is cancelled, and a first message.

import { TaskState } from '@a2a-js/sdk';
import { TaskNotCancelableError } from '@a2a-js/sdk/errors';

/** The agent card of an agent whose JSON-RPC endpoint is `${url}/rpc`. */
export const cardFor = (url) => ({
  name: 'sub-agent', description: 'a test agent', version: '1.0.0',
  supportedInterfaces: [{ url: `${url}/rpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
  skills: [{ id: 'work', name: 'work', description: 'works', tags: ['test'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  securitySchemes: {}, securityRequirements: [], signatures: [],
});

export const hello = () => ({ message: { messageId: 'm-1', role: 1, parts: [{ content: { $case: 'text', value: 'hi' } }] } });

/** Its backend answers 503 with `Retry-After: 3`. */
export class Unavailable {
  async execute() {
    const res = new Response('busy', { status: 503, headers: { 'retry-after': '3' } });
    throw Object.assign(new Error(`backend answered ${res.status}`), { status: res.status, headers: res.headers });
  }
  async cancelTask() {}
}

/** Publishes a working task and waits until it is cancelled (refusing when not `cancelable`). */
export class Working {
  constructor(cancelable) {
    this.cancelable = cancelable;
    this.cancelled = [];
    this.working = new Promise((r) => (this.started = r));
  }
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    bus.publish({ kind: 'task', data: { id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED }, artifacts: [], history: [] } });
    bus.publish({ kind: 'statusUpdate', data: { taskId, contextId, status: { state: TaskState.TASK_STATE_WORKING } } });
    this.started();
    await new Promise((resolve) => (this.stop = resolve));
  }
  async cancelTask(taskId, bus) {
    this.cancelled.push(taskId);
    if (!this.cancelable) throw new TaskNotCancelableError(`task ${taskId} cannot be cancelled`);
    bus.publish({ kind: 'statusUpdate', data: { taskId, contextId: '', status: { state: TaskState.TASK_STATE_CANCELED } } });
    bus.finished();
    this.stop();
  }
}
