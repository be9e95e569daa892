// agent-recovery/mcp: MCP adapters for @modelcontextprotocol/sdk (1.x). A
// client whose tool calls recover, and the server side of a tool's failure.
// Nothing here decides: each call is a run of the small door (recover), whose
// runtime observes what callTool threw or returned (an `isError` result, an
// McpError, a transport failure) and asks the policy.
//
//   const tools = new RecoveringClient(client, { reconnect: connect });
//   const result = await tools.callTool({ name: 'search', arguments: { q: 'wasm' } });

import { PolicyError } from './errors.js';
import { describe } from './json.js';
import { fromError } from './observe.js';
import { Policy } from './policy.js';
import { RECOVER_DEFAULTS, recover } from './recover.js';
import { MemoryStore } from './store.js';

/** The codes (prefixes) the `## Errors` block lists by default: every tool code. */
export const DEFAULT_ERROR_CODES = Object.freeze(['tool.']);

const PASSED = Object.keys(RECOVER_DEFAULTS).filter((k) => !['store', 'tool', 'target', 'stepId', 'call'].includes(k));
const bad = (m) => new PolicyError('invalid_argument', m);

/** What an error says, to compare a call's failure with a ping's. */
function answerOf(e) {
  return JSON.stringify([e?.name, e?.code, e?.message]);
}

/**
 * An MCP `Client` whose `callTool` runs through the recovery door.
 * - a failed call whose session no longer answers a ping: the session is gone;
 *   `reconnect()` (async, returns a new connected Client) is awaited once per
 *   call and serves this and later calls. When the call got the same answer
 *   as the ping (the server refused the session: the call never ran) it is
 *   sent again on the new client at once; otherwise its failure goes to the
 *   policy, whose retry uses the new client.
 * - `options.signal` aborting: the SDK sends `notifications/cancelled` for the
 *   request in flight; the call rejects with the signal's reason and is not retried.
 */
export class RecoveringClient {
  #reconnect;
  #store;
  #options;
  #doors = new Map();
  #renewing;

  /**
   * @param {object} client a connected `Client` (anything with `callTool` and `ping`)
   * @param {object} [options] `reconnect`, `store`, and the options of recover() (policy, clock, seed, errors, ...)
   */
  constructor(client, { reconnect, store, ...options } = {}) {
    for (const k of Object.keys(options)) {
      if (!PASSED.includes(k)) throw bad(`RecoveringClient has no option ${JSON.stringify(k)}; the options are reconnect, store, ${PASSED.join(', ')}`);
    }
    if (reconnect !== undefined && typeof reconnect !== 'function') {
      throw bad(`reconnect is an async function returning a new connected client, got ${describe(reconnect)}`);
    }
    /** The client calls go to (replaced by `reconnect`). */
    this.client = client;
    /** How many times the client was replaced. */
    this.reconnects = 0;
    this.#reconnect = reconnect;
    this.#store = store ?? new MemoryStore();
    this.#options = options;
  }

  /**
   * `client.callTool(params, resultSchema, options)` as a run of the door: the
   * result, or a RecoveryError when the policy gives up (with `errors: 'model'`,
   * the failure rendered for the model).
   */
  async callTool(params, resultSchema, options = {}) {
    const name = String(params?.name ?? '');
    let door = this.#doors.get(name);
    if (door === undefined) {
      door = this.#door(name);
      this.#doors.set(name, door);
    }
    const state = { reconnected: false };
    const signal = options?.signal;
    try {
      return await door(state, params, resultSchema, options);
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      throw e;
    }
  }

  #door(name) {
    const op = async (call, state, params, resultSchema, options) => {
      const signal = options?.signal ? AbortSignal.any([call.signal, options.signal]) : call.signal;
      const send = (client) => client.callTool(params, resultSchema, { ...options, signal });
      const client = this.client;
      try {
        return await send(client);
      } catch (e) {
        if (options?.signal?.aborted) throw options.signal.reason; // the caller gave up: not a failure to retry
        if (!(await this.#renew(client, e, state))) throw e;
      }
      return send(this.client);
    };
    return recover(op, { ...this.#options, call: 'tool', tool: name, target: name, stepId: name, store: this.#store });
  }

  /** Reconnect when `client` is gone; true when the call never ran on it (its failure is the ping's). */
  async #renew(client, error, state) {
    if (this.#reconnect === undefined || state.reconnected) return false;
    let same;
    try {
      await client.ping();
      return false; // the session is alive: the failure is the call's own
    } catch (ping) {
      same = answerOf(ping) === answerOf(error);
    }
    state.reconnected = true;
    if (this.client === client) {
      this.#renewing ??= (async () => {
        try {
          this.client = await this.#reconnect();
          this.reconnects += 1;
        } finally {
          this.#renewing = undefined;
        }
      })();
    }
    await this.#renewing;
    return same;
  }
}

/**
 * A tool's error as an MCP `CallToolResult`: the policy's envelope rendered
 * `mcp-tool-result` (`isError: true`, a text block with the hint,
 * `structuredContent.error` the envelope).
 * @param {unknown} error
 * @param {{policy?: Policy}} [options]
 */
export async function toolErrorResult(error, { policy } = {}) {
  const p = policy ?? (await Policy.load());
  const envelope = p.classify(fromError(error, { call: 'tool' }));
  return p.render(envelope, 'mcp-tool-result');
}

/**
 * `description` followed by the policy's MCP `## Errors` block for `codes`; a
 * description that already has the block is returned as is.
 */
export async function describeErrors(description, { codes = DEFAULT_ERROR_CODES, policy } = {}) {
  const p = policy ?? (await Policy.load());
  const block = p.errorsBlock([...codes]);
  const text = String(description ?? '').trimEnd();
  if (text.includes(block.trim())) return text;
  return text ? `${text}\n\n${block}` : block;
}

/**
 * `server.registerTool(name, config, handler)` for an `McpServer`, with the
 * `## Errors` block appended to the description and the handler's errors
 * answered `isError: true` with the envelope (instead of the SDK's bare
 * message). `codes: null` adds no block. Returns the SDK's RegisteredTool.
 */
export async function registerTool(server, name, config, handler, { policy, codes = DEFAULT_ERROR_CODES } = {}) {
  if (typeof handler !== 'function') throw bad(`registerTool(${JSON.stringify(name)}) takes a handler function, got ${describe(handler)}`);
  const p = policy ?? (await Policy.load());
  const description = codes === null ? config?.description : await describeErrors(config?.description, { codes, policy: p });
  const wrapped = async (...args) => {
    try {
      return await handler(...args);
    } catch (e) {
      if (e?.constructor?.name === 'McpError') throw e; // a protocol error keeps its JSON-RPC code on the wire
      return toolErrorResult(e, { policy: p });
    }
  };
  return server.registerTool(name, { ...config, ...(description === undefined ? {} : { description }) }, wrapped);
}
