// Type test (`npm run typecheck`, never run): agent-recovery/mcp as a user writes it,
// compiled against mcp.d.ts through the package's subpath export.

import { Policy, VirtualClock } from 'agent-recovery';
import { DEFAULT_ERROR_CODES, RecoveringClient, describeErrors, registerTool, toolErrorResult } from 'agent-recovery/mcp';

declare const client: { callTool(p: { name: string }, s?: unknown, o?: { signal?: AbortSignal }): Promise<unknown>; ping(): Promise<unknown> };
declare const server: { registerTool(name: string, config: object, cb: () => unknown): { enabled: boolean } };
declare const policy: Policy;

const tools = new RecoveringClient(client, { reconnect: async () => client, policy, clock: new VirtualClock(0), errors: 'model' });
void tools.callTool({ name: 'search', arguments: { q: 'wasm' } }, undefined, { signal: new AbortController().signal });
const n: number = tools.reconnects;
void n;
// @ts-expect-error the door's own options are set per tool
void new RecoveringClient(client, { target: 'x' });
// @ts-expect-error reconnect returns a client
void new RecoveringClient(client, { reconnect: () => 1 });

const registered: Promise<{ enabled: boolean }> = registerTool(server, 'refund', { description: 'Refund.' }, async () => ({}), { policy, codes: null });
void registered;
void toolErrorResult(new Error('x'), { policy });
void describeErrors('Look up.', { codes: DEFAULT_ERROR_CODES });
