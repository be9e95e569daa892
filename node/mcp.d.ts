// Types of `agent-recovery/mcp` (hand-written; src/mcp.js). The MCP SDK
// (@modelcontextprotocol/sdk 1.x) is not a dependency: its objects are typed
// by the members used here.

import type { Json, Policy, RecoverOptions, Store } from 'agent-recovery';

/** What RecoveringClient calls: the SDK's `Client` (or anything with these two methods). */
export interface McpClientLike {
  callTool(params: { name: string; arguments?: Record<string, unknown> }, resultSchema?: unknown, options?: { signal?: AbortSignal; [key: string]: unknown }): Promise<unknown>;
  ping(options?: unknown): Promise<unknown>;
}

/** The options of RecoveringClient: `reconnect`, `store`, and recover()'s (the door's) own. */
export interface RecoveringClientOptions<C extends McpClientLike = McpClientLike>
  extends Omit<RecoverOptions, 'store' | 'tool' | 'target' | 'stepId' | 'call'> {
  /** A new connected client, awaited (at most once per call) when the session is gone. */
  reconnect?: () => Promise<C>;
  /** Where the breakers (one per tool) are kept across calls. Default: a MemoryStore. */
  store?: Store;
}

/** The codes (prefixes) the `## Errors` block lists by default: `['tool.']`. */
export declare const DEFAULT_ERROR_CODES: readonly string[];

/** An MCP client whose `callTool` runs through the recovery door (see docs/integrations/mcp.md). */
export declare class RecoveringClient<C extends McpClientLike = McpClientLike> {
  constructor(client: C, options?: RecoveringClientOptions<C>);
  /** The client calls go to (replaced by `reconnect`). */
  client: C;
  /** How many times the client was replaced. */
  reconnects: number;
  /**
   * `client.callTool(params, resultSchema, options)` as a run of the door. Rejects with a
   * RecoveryError when the policy gives up, with `options.signal.reason` when the caller aborts.
   */
  callTool(params: { name: string; arguments?: Record<string, unknown>; [key: string]: unknown }, resultSchema?: unknown, options?: { signal?: AbortSignal; [key: string]: unknown }): Promise<any>;
}

/** A tool's error as an MCP CallToolResult: the policy's envelope rendered `mcp-tool-result`. */
export declare function toolErrorResult(error: unknown, options?: { policy?: Policy }): Promise<Json>;

/** `description` followed by the policy's `## Errors` block for `codes` (default `['tool.']`). */
export declare function describeErrors(description: string | undefined, options?: { codes?: readonly string[]; policy?: Policy }): Promise<string>;

/** What registerTool registers on: the SDK's `McpServer`. */
export interface McpServerLike {
  registerTool(name: string, config: any, handler: (...args: any[]) => any): any;
}

/**
 * `server.registerTool(name, config, handler)` with the `## Errors` block appended to the
 * description (`codes: null`: none) and the handler's errors answered `isError: true` with
 * the envelope. Resolves to what the SDK's registerTool returns.
 */
export declare function registerTool<S extends McpServerLike>(
  server: S,
  name: string,
  config: { description?: string; [key: string]: unknown },
  handler: (...args: any[]) => any,
  options?: { policy?: Policy; codes?: readonly string[] | null },
): Promise<ReturnType<S['registerTool']>>;
