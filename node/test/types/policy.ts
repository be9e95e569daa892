// Type test (`npm run typecheck`, never run): the policy API as a user writes it,
// compiled against index.d.ts through the package name. A `@ts-expect-error` line
// is a misuse the declarations must refuse: tsc fails when it compiles.

import {
  CONTRACT,
  DEFAULT_LOAD_TIMEOUT_MS,
  DEFAULT_TIMEOUT_MS,
  ERROR_CODES,
  GRANTED_IMPORTS,
  IsolatedPolicy,
  MAX_INPUT_BYTES,
  POLICY_ERROR_KINDS,
  Policy,
  PolicyError,
  PolicyLoadError,
  PolicyRuntimeError,
  RENDER_FORMATS,
  RecoveryError,
  failureOf,
  fromError,
  fromResponse,
  retry,
  sleep,
} from 'agent-recovery';
import type {
  Action,
  CodeInfo,
  Context,
  Decision,
  Envelope,
  ErrorCode,
  Json,
  Observation,
  PolicyDescription,
  PolicyErrorKind,
  PolicyInfo,
  RenderFormat,
} from 'agent-recovery';

export async function policyApi(): Promise<void> {
  const policy: Policy = await Policy.load();
  const fromPath: Policy = await Policy.load('./policy.wasm', { sha256: 'sha256:00', verify: false, maxInputBytes: 1024 });
  const fromBytes: Policy = await Policy.load(new Uint8Array([0, 97, 115, 109]), {
    smokeTests: [{ observation: { source: 'http', status: 503 }, expect: { action: 'retry' } }],
  });
  const isolated: IsolatedPolicy = await Policy.load(undefined, { isolate: 'worker', timeoutMs: 500, loadTimeoutMs: DEFAULT_LOAD_TIMEOUT_MS });
  const inProcess: Policy = await Policy.load(undefined, { isolate: 'in-process' });
  const direct: IsolatedPolicy = await IsolatedPolicy.load('./policy.wasm', { timeoutMs: 100 });
  // @ts-expect-error: an isolated load gives an IsolatedPolicy, whose methods return promises
  const notSync: Policy = await Policy.load(undefined, { isolate: 'worker' });
  // @ts-expect-error: `isolate` takes 'worker' only
  await Policy.load(undefined, { isolate: 'thread' });

  const envelope: Envelope = policy.classify({ source: 'http', status: 429, headers: { 'retry-after': '2' } });
  const code: string = envelope.code;
  const retryAfter: number | null = envelope.retry_after_ms;
  const context: Context = { attempt: 2, seed: 7n, idempotent: true, config: { tool: { max_attempts: 3 }, retry_budget_ms: 5000 } };
  const decision: Decision = policy.decide({ source: 'network', code: 'ECONNRESET' }, context);
  const action: Action = decision.action;
  const delay: number | null = decision.delay_ms;
  const stamp: string = decision.policy.sha256;
  const text: string = policy.decideJson('{"source":"timeout"}', '{}');
  const classified: string = policy.classifyJson('{"source":"http","status":500}');
  // @ts-expect-error: an http observation needs its status
  policy.classify({ source: 'http' });
  // @ts-expect-error: `attempt` is a number
  policy.decide({ source: 'timeout' }, { attempt: '2' });

  const ms: number = policy.backoff({ call: 'tool', attempt: 1, seed: '42' });
  const key: string = policy.key({ runId: 'r', stepId: 's', tool: 't', args: { a: [1, 'b', null] } });
  const codes: CodeInfo[] = policy.registry();
  const info: CodeInfo | undefined = policy.lookup('tool.http.503_unavailable');
  const rendered: Json = policy.render(envelope, 'jsonrpc-error', { id: 1 });
  const formats: readonly RenderFormat[] = RENDER_FORMATS;
  // @ts-expect-error: not a render format
  policy.render(envelope, 'xml');
  const described: PolicyDescription = await policy.swap('./other.wasm', { verify: true });
  const traps: number = policy.describe().traps;
  const about: PolicyInfo = policy.info();

  const asyncEnvelope: Envelope = await isolated.classify({ source: 'exception', type: 'ValueError' });
  const asyncDecision: Promise<Decision> = isolated.decide('{"source":"timeout"}');
  const restarts: number = isolated.restarts;
  isolated.close();

  const limits: number[] = [DEFAULT_TIMEOUT_MS, DEFAULT_LOAD_TIMEOUT_MS, MAX_INPUT_BYTES];
  const contract: string = CONTRACT;
  const imports: readonly string[] = GRANTED_IMPORTS;
  const kinds: readonly PolicyErrorKind[] = POLICY_ERROR_KINDS;
  const errorCodes: readonly ErrorCode[] = ERROR_CODES;

  void [fromPath, fromBytes, inProcess, direct, notSync, code, retryAfter, action, delay, stamp, text, classified, ms, key, codes, info];
  void [rendered, formats, described, traps, about, asyncEnvelope, asyncDecision, restarts, limits, contract, imports, kinds, errorCodes];
}

export async function errorsApi(err: unknown): Promise<void> {
  if (err instanceof PolicyError) {
    const kind: PolicyErrorKind = err.kind;
    const name: 'PolicyError' = err.name;
    void [kind, name, err.code];
  }
  if (err instanceof PolicyLoadError) {
    const code: ErrorCode = err.code;
    const base: PolicyRuntimeError = err;
    void [code, base, err.reason];
  }
  if (err instanceof RecoveryError) {
    const decision: Decision = err.decision;
    const attempts: number = err.attempts;
    const elapsed: number = err.elapsedMs;
    void [decision, attempts, elapsed, err.observation];
  }
  const own = new PolicyError('invalid_json', 'bad input: not JSON; send JSON text');
  // @ts-expect-error: not a policy error kind
  new PolicyError('bad', 'x');
  void own;
}

export async function retryAndObserve(): Promise<void> {
  const policy = await Policy.load();
  const body: string = await retry(
    async ({ attempt, idempotencyKey, signal }) => {
      const res = await fetch('http://127.0.0.1:1/', { signal, headers: { 'idempotency-key': idempotencyKey ?? String(attempt) } });
      return res.text();
    },
    {
      policy,
      call: 'tool',
      runId: 'run-1',
      stepId: 'fetch',
      tool: 'http.get',
      timeoutMs: 1000,
      maxElapsedMs: 10_000,
      onEvent: (event, json) => void [event.event, event.delay_ms, json],
      failureOf: (result) => (result === '' ? { source: 'exception', type: 'EmptyBody' } : undefined),
    },
  );
  // @ts-expect-error: retry needs a policy
  await retry(async () => 1, {});
  // A fallback chain: the operation calls the target it gets.
  const model: string = await retry(async ({ target }) => target, { policy, call: 'llm', target: 'gpt-4o', fallbacks: ['gpt-4o-mini'] });
  void model;
  await sleep(5, AbortSignal.timeout(100));

  const res: Response = new Response('busy', { status: 503 });
  const observed: Observation = await fromResponse(res, { call: 'tool', maxBodyChars: 100 });
  const thrown: Observation = fromError(new Error('boom'), { timeoutMs: 100, timedOut: true });
  const failure: Observation | undefined = await failureOf({ isError: true, content: [] });
  void [body, observed, thrown, failure];
}
