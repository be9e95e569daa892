// Type test (`npm run typecheck`, never run): the runtime, the stores, the
// dead-letter queue and scenarios as a user writes them, compiled against
// index.d.ts through the package name. A `@ts-expect-error` line is a misuse the
// declarations must refuse: tsc fails when it compiles.

import { trace } from '@opentelemetry/api';
import { LoggerProvider } from '@opentelemetry/sdk-logs';
import {
  APPLICATION_ID,
  CLOSED_KEY,
  DEAD_LETTER_ERROR_KINDS,
  DEAD_LETTER_STATUSES,
  DEAD_LETTER_STREAM,
  DeadLetterError,
  DeadLetters,
  Failed,
  FallbackStore,
  ITEM_PREFIX,
  JOURNAL_PREFIX,
  LEASE_PREFIX,
  MAX_INTEGER,
  MAX_NAME_BYTES,
  MAX_VALUE_BYTES,
  MemoryStore,
  Policy,
  REDIS_URL_DEFAULTS,
  RUNTIME_DEFAULTS,
  RawOutcome,
  RedisStore,
  Response as DeprecatedResponse,
  Run,
  Runtime,
  SCENARIO_ERROR_KINDS,
  SCHEMA_SQL,
  SCHEMA_VERSION,
  SPOOLED_PREFIXES,
  SPOOL_STREAM,
  STORE_ERROR_KINDS,
  ScenarioError,
  ServerClock,
  SqliteStore,
  StoreError,
  SystemClock,
  Telemetry,
  VirtualClock,
  defaultSpoolPath,
  openStore,
  outputJson,
  parseRedisUrl,
  replayKey,
  runBatch,
  runScenario,
} from 'agent-recovery';
import type {
  Call,
  Cas,
  Clock,
  DeadLetterItem,
  DeadLetterStatus,
  Envelope,
  Operations,
  RecoverReport,
  ReplayReport,
  RuntimeEvent,
  ScenarioOutput,
  StepReport,
  Store,
  StoreErrorKind,
  Versioned,
} from 'agent-recovery';

export async function runtimeApi(): Promise<void> {
  const policy = await Policy.load();
  const events: RuntimeEvent[] = [];
  const runtime: Runtime = await Runtime.create({
    policy,
    store: new MemoryStore(),
    clock: new VirtualClock(0),
    seed: 7n,
    attemptTimeoutMs: 2000,
    breaker: { failureThreshold: 5, openMs: 30_000 },
    deadLetter: { owner: 'payments', runbook: 'https://example.com/runbook' },
    inFlightWaitMs: 1000,
    retryQuota: { name: 'llm', capacity: 100, retryCost: 5 },
    onEvent: (event) => events.push(event),
    telemetry: new Telemetry({ tracerProvider: trace.getTracerProvider(), loggerProvider: new LoggerProvider() }),
  });
  // @ts-expect-error: a logger provider has getLogger
  new Telemetry({ loggerProvider: {} });
  await Runtime.create({ policy: { decideJson: (observation: string, context: string) => policy.decideJson(observation, context) } });
  // @ts-expect-error: not a runtime option's type
  await Runtime.create({ attemptBudget: 'ten' });
  const logged = await Runtime.create({ decisionLog: { path: 'decisions.jsonl' } });
  const failedWrites: number | undefined = logged.decisionLog?.failedWrites;
  void failedWrites;

  const run: Run = runtime.run('order-42', { signal: AbortSignal.timeout(60_000) });
  const charged: StepReport<{ id: string }> = await run.step({
    id: 'charge',
    tool: 'payments.charge',
    args: { amount: 100 },
    sideEffect: true,
    fallbacks: ['backup'],
    operation: async (call: Call) => {
      const timeout: number | null = call.timeoutMs;
      void timeout;
      if (call.attempt === 1) return new RawOutcome({ source: 'http', status: 503 });
      if (call.target === 'backup') return new Failed({ source: 'network', code: 'ECONNRESET' });
      return { id: `ch_${call.key}` };
    },
    compensate: () => undefined,
    checkpoint: () => true,
  });
  const value: { id: string } | undefined = charged.value;
  const envelope: Envelope | null = charged.envelope;
  const finished: boolean = charged.runFinished;
  // @ts-expect-error: a step needs its tool
  await run.step({ id: 'x', operation: () => 1 });

  const fanned: StepReport<unknown[]> = await run.fanout('quotes', 1, [
    { id: 'a', tool: 'quote', operation: () => 1 },
    { id: 'b', tool: 'quote', operation: () => new RawOutcome('{"source":"http","status":400}') },
  ]);
  const ended: StepReport = await run.end();
  const all: string[] = run.events;

  const result: number = await runtime.withRun('order-43', async (r: Run) => (await r.step({ id: 's', tool: 't', operation: () => 2 })).value ?? 0);
  const operations: Operations = { 'payments.charge': { operation: () => ({ id: 'ch_1' }) } };
  const recovered: RecoverReport[] = await runtime.recover(operations, { olderThanMs: 1000 });
  const judged: Envelope | undefined = runtime.checkOutcome({ source: 'http', status: 200, body: { refusal: 'no' } });

  // The deprecated name is the same class and the same type.
  const old: RawOutcome = new DeprecatedResponse({ source: 'http', status: 304 });
  const renamed: DeprecatedResponse = new RawOutcome('{"source":"http","status":304}');

  const defaults: number = RUNTIME_DEFAULTS.breaker.failureThreshold;
  const journal: true = RUNTIME_DEFAULTS.journal;
  const clocks: Clock[] = [new SystemClock(), new VirtualClock()];
  void [value, envelope, finished, fanned, ended, all, result, recovered, judged, old, renamed, defaults, journal, clocks];
  void Telemetry.off();
}

export function storeApi(): void {
  const stores: Store[] = [new MemoryStore(), new SqliteStore('/tmp/ar.db', { synchronous: 'normal', busyTimeoutMs: 100 })];
  const store = stores[0];
  const cas: Cas = store.compareAndSet('k', null, '"v"', null, 0);
  if (cas.written) {
    const version: number = cas.version;
    void version;
  } else {
    const current: Versioned | null = cas.current;
    void current;
  }
  const got: Versioned | null = store.get('k', 0);
  const seq: number = store.append('s', '{}', 0);
  const records: Array<[number, string]> = store.read('s', 0, 10);
  const keys: string[] = store.keys('', 0);
  const purged: number = store.purgeExpired(0);
  // @ts-expect-error: values are JSON text
  store.compareAndSet('k', null, { v: 1 }, null, 0);

  const opened: Store & { close(): void } = openStore('redis://127.0.0.1:6379/0?prefix=ar', { onEvent: (text) => void text });
  opened.close();
  const redis = new RedisStore('redis://127.0.0.1:6379');
  const clock: ServerClock = redis.serverClock();
  const probeMs: number = redis.options.probeMs;
  // @ts-expect-error: the options leave out the URLs that carry the password
  void redis.options.clientUrl;
  const fallback = new FallbackStore(redis, new SqliteStore(defaultSpoolPath('redis://127.0.0.1:6379')), { probeMs: 500 });
  const unsubscribe: () => void = fallback.subscribe((text) => void text);
  const healthy: boolean = fallback.healthy;
  const options = parseRedisUrl('redis://127.0.0.1:6379');
  const fallbackMode: 'local' | 'none' = options.fallback;
  const prefix: 'ar' = REDIS_URL_DEFAULTS.prefix;

  try {
    store.get('', 0);
  } catch (e) {
    if (e instanceof StoreError) {
      const kind: StoreErrorKind = e.kind;
      void kind;
    }
  }
  const constants: number[] = [SCHEMA_VERSION, APPLICATION_ID, MAX_NAME_BYTES, MAX_VALUE_BYTES, MAX_INTEGER];
  const names: string[] = [SCHEMA_SQL, SPOOL_STREAM, ...SPOOLED_PREFIXES, ...STORE_ERROR_KINDS];
  void [got, seq, records, keys, purged, clock, probeMs, unsubscribe, healthy, fallbackMode, prefix, constants, names];
}

export async function deadLettersApi(runtime: Runtime, operations: Operations): Promise<void> {
  const queue: DeadLetters = runtime.deadLetters;
  const open: DeadLetterItem[] = queue.list({ status: 'open', limit: 10 });
  const status: DeadLetterStatus = queue.show('1').status;
  const requested: ReplayReport = queue.requestReplay(1);
  const replayed: ReplayReport = await queue.replay('1', operations);
  const depth: number = queue.depth();
  // @ts-expect-error: not a dead-letter status
  queue.list({ status: 'closed' });
  try {
    queue.purge('1');
  } catch (e) {
    if (e instanceof DeadLetterError) void e.kind;
  }
  const key: string = replayKey('abc', 1);
  const names: string[] = [ITEM_PREFIX, CLOSED_KEY, LEASE_PREFIX, JOURNAL_PREFIX, DEAD_LETTER_STREAM, ...DEAD_LETTER_STATUSES, ...DEAD_LETTER_ERROR_KINDS];
  void [open, status, requested, replayed, depth, key, names];
}

export async function scenarioApi(): Promise<void> {
  const output: ScenarioOutput = await runScenario({ steps: [] }, new MemoryStore());
  const json: string = outputJson(output);
  for await (const line of runBatch(['{"steps":[]}'])) {
    const text: string = line;
    void text;
  }
  try {
    await runScenario('not json');
  } catch (e) {
    if (e instanceof ScenarioError) void e.kind;
  }
  void [json, SCENARIO_ERROR_KINDS];
}
