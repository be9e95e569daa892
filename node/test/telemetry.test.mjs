// OpenTelemetry through the real component, the real runtime and the real
// OpenTelemetry SDK (its in-memory span and metric exporters).
//
// Two independent sources of truth:
// - a second implementation: the Rust CLI's `agent-recovery simulate SCENARIO
//   --trace-out FILE` (OTLP JSON, written by the Rust SDK) for the same
//   scenarios; the Node spans must match it span for span (names, parents,
//   virtual times, attributes, statuses, span events, links);
// - docs/telemetry.md: every span, attribute, span event and metric the SDK
//   receives must be in its tables with the documented type and unit, and the
//   values follow its mapping, with the delays of tests/vectors/tools/jitter.py
//   (seed 7, tool calls: 53, 152, 3, 672 ms after attempts 1 to 4).
// Nothing here was recorded from a run of this code.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ValueType, context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { AggregationTemporality, DataPointType, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { AlwaysOffSampler, BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Policy, PolicyError, RawOutcome, Runtime, Telemetry, VirtualClock, runScenario } from '../src/index.js';
import { REPO, artifact } from './helpers.mjs';

const T0 = 1_767_225_600_000;
const DOC = readFileSync(join(REPO, 'docs', 'telemetry.md'), 'utf8');
const QUOTA = {
  source: 'http',
  status: 429,
  body: { error: { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } },
};
const UNAVAILABLE = { source: 'http', status: 503 };

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

/** The real SDK with in-memory exporters. */
function sdk() {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const logs = new InMemoryLogRecordExporter();
  const loggerProvider = new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter: logs })] });
  return {
    tracerProvider,
    meterProvider,
    telemetry: () => new Telemetry({ tracerProvider, meterProvider, loggerProvider }),
    logs: () => logs.getFinishedLogRecords(),
    spans: () => spans.getFinishedSpans(),
    reset: () => spans.reset(),
    async metrics() {
      await reader.forceFlush();
      return exporter.getMetrics().at(-1);
    },
    async shutdown() {
      await loggerProvider.shutdown();
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
    },
  };
}

const sha256 = (text) => createHash('sha256').update(text, 'utf8').digest('hex');

/** The seeded full-jitter delay, from the independent Python implementation. */
function toolDelay(attempt) {
  const r = spawnSync('python3', [join(REPO, 'tests/vectors/tools/jitter.py'), '7', String(attempt), '250', '30000'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return Number(r.stdout.trim());
}

// ------------------------------------------------------------ docs/telemetry.md

/** The rows of the markdown table under `heading`: arrays of cells. */
function table(heading) {
  const at = DOC.indexOf(`\n## ${heading}\n`);
  assert.ok(at >= 0, `docs/telemetry.md has no "## ${heading}"`);
  const lines = DOC.slice(at).split('\n');
  const start = lines.findIndex((l) => l.startsWith('|'));
  const rows = [];
  for (const l of lines.slice(start + 2)) {
    if (!l.startsWith('|')) break;
    rows.push(l.slice(1, -1).split(' | ').map((c) => c.trim()));
  }
  return rows;
}

/** `a.b.c`, `.d`, `.e` in a cell: the full names (`.d` continues the first name's prefix). */
function names(cell) {
  const all = [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
  const prefix = all[0].slice(0, all[0].lastIndexOf('.'));
  return all.map((n) => (n.startsWith('.') ? prefix + n : n));
}

const DOC_SPANS = new Set(table('Spans').flatMap((r) => names(r[0])));
const DOC_ATTRS = new Map(table('Attributes').flatMap((r) => names(r[0].replace(' (**semconv**)', '')).map((n) => [n, r[1]])));
const DOC_EVENTS = new Set(table('Span events').flatMap((r) => names(r[0])));
const DOC_METRICS = new Map(
  table('Metrics').map((r) => [names(r[0])[0], { kind: r[1], unit: r[2].replaceAll('`', ''), attrs: new Set(r[3] === '' ? [] : [...r[3].matchAll(/`([a-z_.]+)`/g)].map((m) => m[1])) }]),
);
const typeOf = (v) => (typeof v === 'boolean' ? 'bool' : typeof v === 'number' ? (Number.isInteger(v) ? 'int' : 'double') : typeof v);
const seenMetrics = new Set();

/** Every span, attribute and span event is in the doc's tables, with the documented type. */
function checkSpansAgainstDoc(spans) {
  for (const s of spans) {
    assert.ok(DOC_SPANS.has(s.name), `span ${s.name} is not in docs/telemetry.md, "Spans"`);
    const check = (attrs, where) => {
      for (const [k, v] of Object.entries(attrs)) {
        assert.ok(DOC_ATTRS.has(k), `${where}: attribute ${k} is not in docs/telemetry.md, "Attributes"`);
        assert.equal(typeOf(v), DOC_ATTRS.get(k), `${where}: ${k} has type ${typeOf(v)}`);
      }
    };
    check(s.attributes, s.name);
    for (const e of s.events) {
      assert.ok(DOC_EVENTS.has(e.name), `span event ${e.name} is not in docs/telemetry.md, "Span events"`);
      check(e.attributes ?? {}, e.name);
    }
    for (const l of s.links) check(l.attributes ?? {}, `${s.name} link`);
  }
}

/** Every metric: in the doc's table, with its kind, unit, an integer value type and only its attributes. */
function checkMetricsAgainstDoc(rm) {
  for (const sm of rm.scopeMetrics) {
    assert.equal(sm.scope.name, 'agent-recovery');
    for (const m of sm.metrics) {
      const doc = DOC_METRICS.get(m.descriptor.name);
      assert.ok(doc, `metric ${m.descriptor.name} is not in docs/telemetry.md, "Metrics"`);
      seenMetrics.add(m.descriptor.name);
      assert.equal(m.descriptor.unit, doc.unit, m.descriptor.name);
      assert.equal(m.descriptor.valueType, ValueType.INT, `${m.descriptor.name} is an integer instrument`);
      const kind = { 'counter (u64)': DataPointType.SUM, 'histogram (u64)': DataPointType.HISTOGRAM, 'gauge (u64)': DataPointType.GAUGE }[doc.kind];
      assert.equal(m.dataPointType, kind, m.descriptor.name);
      if (kind === DataPointType.SUM) assert.equal(m.isMonotonic, true, m.descriptor.name);
      for (const dp of m.dataPoints) {
        for (const k of Object.keys(dp.attributes)) assert.ok(doc.attrs.has(k), `${m.descriptor.name} has attribute ${k}, not in its row`);
      }
    }
  }
}

/** A counter's data points as [sorted "k=v" attributes, value], sorted. */
function counter(rm, name) {
  const m = rm.scopeMetrics.flatMap((sm) => sm.metrics).find((x) => x.descriptor.name === name);
  if (m === undefined) return [];
  return m.dataPoints
    .map((dp) => [Object.entries(dp.attributes).map(([k, v]) => `${k}=${v}`).sort().join(' '), dp.value])
    .sort((a, b) => (a[0] < b[0] ? -1 : 1));
}
const points = (pairs) => pairs.map(([a, n]) => [a.split(' ').sort().join(' '), n]).sort((a, b) => (a[0] < b[0] ? -1 : 1));

// ------------------------------------------------------------ the Rust trace, span for span

const SCENARIOS = {
  // Retries, a fallback, a compensation and a dead-letter write (the Rust test's run).
  'retries-fallback-compensation-dead-letter': {
    run_id: 'r-otel',
    seed: 7,
    now_ms: T0,
    config: { breaker: { failure_threshold: 10, open_ms: 30000 } },
    steps: [
      {
        id: 'answer', tool: 'llm.chat', call: 'llm', target: 'openai', side_effect: true,
        outcomes: [QUOTA], fallbacks: [{ target: 'anthropic', outcomes: ['ok'] }], compensation: { outcomes: ['ok'] },
      },
      { id: 'ship', tool: 'shipping.create', call: 'tool', target: 'ship', outcomes: Array(5).fill(UNAVAILABLE) },
    ],
  },
  // A fan-out, then a breaker that opens (threshold 1) and short-circuits.
  'fanout-breaker-short-circuit': {
    run_id: 'r-fan',
    seed: 7,
    now_ms: T0,
    config: { breaker: { failure_threshold: 1, open_ms: 30000 } },
    steps: [
      {
        id: 'quotes',
        fanout: {
          min_results: 1,
          branches: [
            { id: 'q-a', tool: 'quote', target: 'a', outcomes: ['ok'] },
            { id: 'q-b', tool: 'quote', target: 'b', outcomes: [UNAVAILABLE, 'ok'] },
          ],
        },
      },
      { id: 'poll', tool: 'status', call: 'tool', target: 'flaky', outcomes: Array(8).fill(UNAVAILABLE) },
    ],
  },
  // Cancelled during a retry wait: the completed step is compensated, its chain links it.
  'cancel-compensation-chain': {
    run_id: 'r-cancel',
    seed: 7,
    now_ms: T0,
    cancel_at_ms: 100,
    steps: [
      { id: 'reserve', tool: 'inventory.reserve', call: 'tool', side_effect: true, outcomes: ['ok'], compensation: { outcomes: ['ok'] } },
      { id: 'pay', tool: 'payments.charge', call: 'tool', outcomes: Array(5).fill(UNAVAILABLE) },
    ],
  },
};

const ns = ([s, n]) => (BigInt(s) * 1_000_000_000n + BigInt(n)).toString();
const nodeValue = (v) => `${typeOf(v)}:${v}`;
const otlpValue = (v) =>
  'stringValue' in v ? `string:${v.stringValue}` : 'intValue' in v ? `int:${v.intValue}` : 'boolValue' in v ? `bool:${v.boolValue}` : `double:${v.doubleValue}`;
const sorted = (entries) => Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : 1)));

/** Spans in export order, with ids replaced by positions (parents, links) and first-seen trace numbers. */
function shape(list, get) {
  const index = new Map(list.map((s, i) => [get.id(s), i]));
  const traces = new Map();
  return list.map((s) => {
    const tid = get.trace(s);
    if (!traces.has(tid)) traces.set(tid, traces.size);
    const parent = get.parent(s);
    return {
      name: s.name,
      kind: get.kind(s),
      trace: traces.get(tid),
      parent: parent ? (index.get(parent) ?? 'outside') : null,
      start: get.start(s),
      end: get.end(s),
      status: get.status(s),
      attributes: get.attrs(s),
      events: get.events(s),
      links: get.links(s).map((l) => ({ span: index.get(l.id) ?? 'outside', attributes: l.attrs })),
    };
  });
}

const fromRust = (line) => {
  const req = JSON.parse(line);
  const scopes = req.resourceSpans.flatMap((r) => r.scopeSpans);
  const attrs = (a) => sorted((a ?? []).map((kv) => [kv.key, otlpValue(kv.value)]));
  return {
    scopes: scopes.map((s) => [s.scope.name, s.scope.version]),
    spans: shape(scopes.flatMap((s) => s.spans), {
      id: (s) => s.spanId,
      trace: (s) => s.traceId,
      parent: (s) => s.parentSpanId || null,
      kind: (s) => s.kind,
      start: (s) => s.startTimeUnixNano,
      end: (s) => s.endTimeUnixNano,
      status: (s) => (s.status?.code === 2 ? { code: 2, message: s.status.message } : { code: s.status?.code ?? 0 }),
      attrs: (s) => attrs(s.attributes),
      events: (s) => (s.events ?? []).map((e) => ({ name: e.name, time: e.timeUnixNano, attributes: attrs(e.attributes) })),
      links: (s) => (s.links ?? []).map((l) => ({ id: l.spanId, attrs: attrs(l.attributes) })),
    }),
  };
};

const fromNode = (list) => {
  const attrs = (a) => sorted(Object.entries(a ?? {}).map(([k, v]) => [k, nodeValue(v)]));
  return {
    scopes: [...new Set(list.map((s) => JSON.stringify([s.instrumentationScope.name, s.instrumentationScope.version])))].map((x) => JSON.parse(x)),
    spans: shape(list, {
      id: (s) => s.spanContext().spanId,
      trace: (s) => s.spanContext().traceId,
      parent: (s) => s.parentSpanContext?.spanId ?? null,
      kind: (s) => s.kind + 1, // the API's INTERNAL is 0; OTLP's SPAN_KIND_INTERNAL is 1
      start: (s) => ns(s.startTime),
      end: (s) => ns(s.endTime),
      status: (s) => (s.status.code === 2 ? { code: 2, message: s.status.message } : { code: s.status.code }),
      attrs: (s) => attrs(s.attributes),
      events: (s) => s.events.map((e) => ({ name: e.name, time: ns(e.time), attributes: attrs(e.attributes) })),
      links: (s) => s.links.map((l) => ({ id: l.context.spanId, attrs: attrs(l.attributes) })),
    }),
  };
};

/** `agent-recovery simulate SCENARIO --trace-out FILE`: the Rust runtime's spans for it. */
function rustTrace(name, scenario, dir) {
  const exe = join(process.env.CARGO_TARGET_DIR ?? join(REPO, 'target'), 'release', 'agent-recovery');
  assert.ok(existsSync(exe), `${exe} is missing; run \`cargo build --release -p agent-recovery-cli\``);
  const path = join(dir, `${name}.json`);
  const out = join(dir, `${name}.otlp.jsonl`);
  writeFileSync(path, JSON.stringify(scenario));
  const r = spawnSync(exe, ['simulate', path, '--json', '--trace-out', out], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const lines = readFileSync(out, 'utf8').split('\n').filter((l) => l !== '');
  assert.equal(lines.length, 1, 'one ExportTraceServiceRequest per simulate run');
  return { json: r.stdout.trim(), trace: fromRust(lines[0]) };
}

test('a second implementation: each scenario gives the spans of `agent-recovery simulate --trace-out`, span for span', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-recovery-otel-'));
  const otel = sdk();
  // As the CLI does: the global provider, picked up by the runtime the scenario builds.
  trace.setGlobalTracerProvider(otel.tracerProvider);
  try {
    for (const [name, scenario] of Object.entries(SCENARIOS)) {
      const rust = rustTrace(name, scenario, dir);
      otel.reset();
      const out = await runScenario(JSON.stringify(scenario));
      assert.equal(out.json, rust.json, `${name}: the same run (events and dead letters) as Rust`);
      const node = fromNode(otel.spans());
      assert.deepEqual(node.scopes, rust.trace.scopes, `${name}: the instrumentation scope`);
      assert.ok(node.spans.length >= 3, `${name}: spans were recorded`);
      assert.deepEqual(node.spans, rust.trace.spans, `${name}: the Node spans differ from the Rust ones`);
      checkSpansAgainstDoc(otel.spans());
    }
  } finally {
    trace.disable();
    await otel.shutdown();
    rmSync(dir, { recursive: true, force: true });
  }
});

// ------------------------------------------------------------ the schema, checked value by value

test('retries, a fallback, a compensation and a dead-letter write: the documented spans, attributes and metrics', async () => {
  const otel = sdk();
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ clock, seed: 7, breaker: { failureThreshold: 10 }, telemetry: otel.telemetry() });
  const run = runtime.run('r-otel');
  const answer = await run.step({
    id: 'answer', tool: 'llm.chat', call: 'llm', target: 'openai', fallbacks: ['anthropic'], sideEffect: true,
    operation: async (call) => (call.target === 'openai' ? new RawOutcome(QUOTA) : { text: 'hi' }),
    compensate: async () => null,
  });
  assert.equal(answer.outcome, 'ok');
  const ship = await run.step({ id: 'ship', tool: 'shipping.create', call: 'tool', target: 'ship', operation: async () => new RawOutcome(UNAVAILABLE) });
  assert.equal(ship.outcome, 'dead_lettered');

  const spans = otel.spans();
  checkSpansAgainstDoc(spans);
  const named = (n) => spans.filter((s) => s.name === n);
  const [steps, attempts, chains] = [named('agent_recovery.step'), named('agent_recovery.attempt'), named('agent_recovery.compensation')];
  assert.deepEqual([steps.length, attempts.length, chains.length, spans.length], [2, 8, 1, 11]);
  const step = (id) => steps.find((s) => s.attributes['agent_recovery.step.id'] === id);
  const [a, b] = [step('answer'), step('ship')];
  const at = (ms) => [Math.floor(ms / 1000), (ms % 1000) * 1e6];
  const policy = await Policy.load();
  assert.deepEqual(a.attributes, {
    'agent_recovery.run.id': 'r-otel',
    'agent_recovery.step.id': 'answer',
    'agent_recovery.tool': 'llm.chat',
    'agent_recovery.target': 'openai',
    'agent_recovery.policy.name': 'agent-recovery-reference',
    'agent_recovery.policy.version': policy.info().version,
    'agent_recovery.policy.sha256': sha256Of(readFileSync(join(REPO, 'node', 'gen', 'component.wasm'))),
    'agent_recovery.step.outcome': 'ok',
  });
  assert.equal(a.status.code, 0);
  assert.equal(a.parentSpanContext, undefined, 'no active span: a root');
  assert.deepEqual([a.startTime, a.endTime], [at(T0), at(T0)]);
  const delays = [1, 2, 3, 4].map(toolDelay);
  assert.deepEqual(delays, [53, 152, 3, 672]);
  const total = delays.reduce((x, y) => x + y);
  assert.equal(b.attributes['agent_recovery.step.outcome'], 'dead_lettered');
  assert.equal(b.attributes['error.type'], 'tool.http.503_unavailable');
  assert.deepEqual(b.status, { code: 2, message: 'tool.http.503_unavailable' });
  assert.deepEqual([b.startTime, b.endTime], [at(T0), at(T0 + total)]);

  const children = (p) => attempts.filter((s) => s.parentSpanContext?.spanId === p.spanContext().spanId);
  // The fallback: attempt 1 on openai (quota: fallback), attempt 2 with the same key on anthropic.
  const [a1, a2] = children(a);
  assert.equal(a1.attributes['agent_recovery.call.kind'], 'operation');
  assert.equal(a1.attributes['agent_recovery.target'], 'openai');
  assert.equal(a1.attributes['agent_recovery.attempt'], 1);
  assert.equal(a1.attributes['error.type'], 'llm.quota.exhausted');
  assert.equal(a1.attributes['agent_recovery.action'], 'fallback');
  assert.equal(a1.attributes['agent_recovery.class'], 'policy');
  assert.equal(a1.attributes['agent_recovery.retryable'], false);
  assert.equal(a1.attributes['agent_recovery.policy.name'], 'agent-recovery-reference');
  assert.equal(a1.attributes['http.request.resend_count'], undefined, 'not a resend');
  assert.equal(a1.status.code, 2);
  assert.equal(a2.attributes['agent_recovery.call.kind'], 'fallback');
  assert.equal(a2.attributes['agent_recovery.target'], 'anthropic');
  assert.equal(a2.attributes['agent_recovery.attempt'], 2);
  assert.equal(a2.attributes['http.request.resend_count'], 1);
  assert.equal(a2.attributes['error.type'], undefined);
  assert.equal(a2.status.code, 0);
  assert.equal(a1.attributes['agent_recovery.idempotency_key.hash'], a2.attributes['agent_recovery.idempotency_key.hash']);
  assert.ok(a.events.some((e) => e.name === 'agent_recovery.fallback'));

  // The retries: five attempts, each after the previous wait, four `retry`, then `compensate`.
  const sh = children(b);
  const starts = [0, 53, 205, 208, 880];
  sh.forEach((s, n) => {
    assert.equal(s.attributes['agent_recovery.attempt'], n + 1);
    assert.equal(s.attributes['http.request.resend_count'], n === 0 ? undefined : n);
    assert.equal(s.attributes['error.type'], 'tool.http.503_unavailable');
    assert.equal(s.attributes['agent_recovery.class'], 'transient');
    assert.equal(s.attributes['agent_recovery.retryable'], true);
    assert.equal(s.attributes['agent_recovery.delay_ms'], delays[n]);
    assert.equal(s.attributes['agent_recovery.action'], n < 4 ? 'retry' : 'compensate');
    assert.deepEqual(s.startTime, at(T0 + starts[n]));
  });
  assert.equal(sh.length, 5);
  // The key's hash, never the key: key = sha256(canonical JSON of [run_id, step_id, tool, args]) (docs/envelope-and-decision.md).
  const key = sha256('["r-otel","ship","shipping.create",null]');
  assert.equal(sh[0].attributes['agent_recovery.idempotency_key.hash'], sha256(key));
  assert.ok(!JSON.stringify(sh.map((s) => s.attributes)).includes(key), 'the key itself is never an attribute');
  const sleeps = b.events.filter((e) => e.name === 'agent_recovery.sleep');
  assert.deepEqual(sleeps.map((e) => e.attributes['agent_recovery.delay_ms']), delays);

  // The compensation chain: a child of `ship`, linked to `answer`, holding the compensation call.
  const [chain] = chains;
  assert.equal(chain.parentSpanContext.spanId, b.spanContext().spanId);
  assert.deepEqual(chain.links.map((l) => [l.context.spanId, l.attributes]), [[a.spanContext().spanId, { 'agent_recovery.step.id': 'answer' }]]);
  assert.equal(chain.attributes['agent_recovery.compensation.count'], 1);
  assert.equal(chain.attributes['agent_recovery.compensation.failed'], 0);
  const [comp] = children(chain);
  assert.equal(comp.attributes['agent_recovery.call.kind'], 'compensation');
  assert.equal(comp.attributes['agent_recovery.step.id'], 'answer');
  assert.deepEqual(comp.startTime, at(T0 + total));
  assert.deepEqual(chain.events.map((e) => e.name), ['agent_recovery.compensate']);

  // The dead-letter record, in full, as a span event of `ship`.
  const dl = b.events.filter((e) => e.name === 'agent_recovery.dead_letter');
  assert.equal(dl.length, 1);
  const record = dl[0].attributes['agent_recovery.dead_letter.record'];
  assert.equal(record, runtime.store.read('agent-recovery/dead-letter', 0, 10)[0][1], "the store's bytes");
  assert.equal(JSON.parse(record).attempts, 5);
  assert.equal(dl[0].attributes['error.type'], 'tool.http.503_unavailable');
  assert.deepEqual(dl[0].time, at(T0 + total));

  // And one log record for it: the same bytes as its body, in `ship`'s trace (docs/telemetry.md).
  const logs = otel.logs();
  assert.equal(logs.length, 1, 'one log record per dead-letter write');
  const [log] = logs;
  assert.equal(log.instrumentationScope.name, 'agent-recovery');
  assert.equal(log.eventName, 'agent_recovery.dead_letter');
  assert.equal(log.severityNumber, 13, 'WARN in the log data model');
  assert.equal(log.severityText, 'WARN');
  assert.equal(log.body, record);
  assert.deepEqual(log.hrTime, at(T0 + total));
  assert.deepEqual(log.attributes, { 'agent_recovery.run.id': 'r-otel', 'agent_recovery.step.id': 'ship', 'error.type': 'tool.http.503_unavailable' });
  assert.equal(log.spanContext.traceId, b.spanContext().traceId);
  assert.equal(log.spanContext.spanId, b.spanContext().spanId);

  const rm = await otel.metrics();
  checkMetricsAgainstDoc(rm);
  const op503 = (action) => `agent_recovery.action=${action} agent_recovery.call.kind=operation error.type=tool.http.503_unavailable`;
  assert.deepEqual(
    counter(rm, 'agent_recovery.attempts'),
    points([
      ['agent_recovery.action=fallback agent_recovery.call.kind=operation error.type=llm.quota.exhausted', 1],
      ['agent_recovery.call.kind=fallback', 1],
      [op503('retry'), 4],
      [op503('compensate'), 1],
      ['agent_recovery.call.kind=compensation', 1],
    ]),
  );
  assert.deepEqual(
    counter(rm, 'agent_recovery.decisions'),
    points([
      ['agent_recovery.action=fallback error.type=llm.quota.exhausted', 1],
      ['agent_recovery.action=retry error.type=tool.http.503_unavailable', 4],
      ['agent_recovery.action=compensate error.type=tool.http.503_unavailable', 1],
    ]),
  );
  assert.deepEqual(counter(rm, 'agent_recovery.dead_letters'), [['error.type=tool.http.503_unavailable', 1]]);
  assert.deepEqual(counter(rm, 'agent_recovery.compensations'), [['agent_recovery.compensation.state=started', 1]]);
  assert.deepEqual(counter(rm, 'agent_recovery.steps'), points([['agent_recovery.step.outcome=ok', 1], ['agent_recovery.step.outcome=dead_lettered', 1]]));
  // The quota refusal the step fell back from opened openai's breaker (a sticky fallback).
  assert.deepEqual(counter(rm, 'agent_recovery.breaker.transitions'), [['agent_recovery.breaker.state=open agent_recovery.target=openai', 1]]);
  const hist = rm.scopeMetrics.flatMap((sm) => sm.metrics).find((m) => m.descriptor.name === 'agent_recovery.retry.delay');
  assert.equal(hist.dataPoints.length, 1);
  assert.deepEqual(hist.dataPoints[0].attributes, { 'agent_recovery.target': 'ship' });
  // One record written, none closed: the depth is 1; purging it records 0.
  const depth = (m) => {
    const g = m.scopeMetrics.flatMap((sm) => sm.metrics).find((x) => x.descriptor.name === 'agent_recovery.dead_letter.depth');
    assert.equal(g.descriptor.unit, '{record}');
    return g.dataPoints.map((p) => [p.attributes, p.value]);
  };
  assert.deepEqual(depth(rm), [[{}, 1]]);
  const [item] = runtime.deadLetters.list();
  runtime.deadLetters.purge(item.id);
  assert.deepEqual(depth(await otel.metrics()), [[{}, 0]]);
  const { count, sum, min, max } = hist.dataPoints[0].value;
  assert.deepEqual({ count, sum, min, max }, { count: 4, sum: total, min: 3, max: 672 });
  await otel.shutdown();
});

function sha256Of(bytes) {
  return createHash('sha256').update(bytes).digest('hex');
}

test('a fan-out span holds its branches; a breaker that opens is a transition, the next call a short-circuit', async () => {
  const otel = sdk();
  const runtime = await Runtime.create({ clock: new VirtualClock(T0), seed: 7, breaker: { failureThreshold: 1, openMs: 30_000 }, telemetry: otel.telemetry() });
  const run = runtime.run('r-fan');
  const report = await run.fanout('quotes', 1, [
    { id: 'q-a', tool: 'quote', target: 'a', operation: async () => 1 },
    { id: 'q-b', tool: 'quote', target: 'b', operation: async () => 2 },
  ]);
  assert.equal(report.outcome, 'ok');
  const poll = await run.step({ id: 'poll', tool: 'status', call: 'tool', target: 'flaky', operation: async () => new RawOutcome(UNAVAILABLE) });
  assert.notEqual(poll.outcome, 'ok');

  const spans = otel.spans();
  checkSpansAgainstDoc(spans);
  const [fan] = spans.filter((s) => s.name === 'agent_recovery.fanout');
  assert.equal(fan.attributes['agent_recovery.fanout.min_results'], 1);
  assert.equal(fan.attributes['agent_recovery.fanout.branches'], 2);
  assert.equal(fan.attributes['agent_recovery.step.outcome'], 'ok');
  const branches = spans.filter((s) => s.name === 'agent_recovery.step' && s.parentSpanContext?.spanId === fan.spanContext().spanId);
  assert.deepEqual(branches.map((s) => s.attributes['agent_recovery.step.id']).sort(), ['q-a', 'q-b']);
  assert.ok(branches.every((s) => s.spanContext().traceId === fan.spanContext().traceId));

  const rm = await otel.metrics();
  checkMetricsAgainstDoc(rm);
  const transitions = Object.fromEntries(counter(rm, 'agent_recovery.breaker.transitions'));
  const open = transitions['agent_recovery.breaker.state=open agent_recovery.target=flaky'];
  // The retry finds `flaky` open and, with on_open "fail" (the default), the
  // step ends at once (docs/fallbacks-and-breakers.md): one opening, no probe.
  assert.equal(open, 1, JSON.stringify(transitions));
  assert.equal(transitions['agent_recovery.breaker.state=half_open agent_recovery.target=flaky'], undefined);
  assert.equal(Object.keys(transitions).length, 1, JSON.stringify(transitions));
  const shorts = counter(rm, 'agent_recovery.short_circuits');
  assert.equal(shorts.length, 1);
  assert.equal(shorts[0][0], 'agent_recovery.target=flaky');
  assert.ok(shorts[0][1] >= 1);
  const pollSpan = spans.find((s) => s.name === 'agent_recovery.step' && s.attributes['agent_recovery.step.id'] === 'poll');
  const events = pollSpan.events.map((e) => e.name);
  assert.ok(events.includes('agent_recovery.breaker') && events.includes('agent_recovery.short_circuit'), events.join());
  await otel.shutdown();
});

test('a cancellation between steps: a root compensation chain linked to the step it undoes, no step in the metrics', async () => {
  const otel = sdk();
  const runtime = await Runtime.create({ clock: new VirtualClock(T0), seed: 7, telemetry: otel.telemetry() });
  const run = runtime.run('r-cancel');
  const r = await run.step({ id: 'reserve', tool: 'inventory.reserve', sideEffect: true, operation: async () => null, compensate: async () => null });
  assert.equal(r.outcome, 'ok');
  assert.equal((await run.cancel()).outcome, 'cancelled');
  const spans = otel.spans();
  checkSpansAgainstDoc(spans);
  const [step] = spans.filter((s) => s.name === 'agent_recovery.step');
  const chains = spans.filter((s) => s.name === 'agent_recovery.compensation');
  assert.equal(chains.length, 1);
  assert.equal(chains[0].parentSpanContext, undefined);
  assert.deepEqual(chains[0].links.map((l) => l.context.spanId), [step.spanContext().spanId]);
  const comp = spans.filter((s) => s.parentSpanContext?.spanId === chains[0].spanContext().spanId);
  assert.deepEqual(comp.map((s) => [s.name, s.attributes['agent_recovery.call.kind'], s.attributes['agent_recovery.step.id']]), [
    ['agent_recovery.attempt', 'compensation', 'reserve'],
  ]);
  const rm = await otel.metrics();
  checkMetricsAgainstDoc(rm);
  assert.deepEqual(counter(rm, 'agent_recovery.steps'), [['agent_recovery.step.outcome=ok', 1]]);
  assert.deepEqual(counter(rm, 'agent_recovery.compensations'), [['agent_recovery.compensation.state=started', 1]]);
  await otel.shutdown();
});

test("a step run inside the caller's span is its child, in its trace", async () => {
  const otel = sdk();
  const runtime = await Runtime.create({ clock: new VirtualClock(T0), telemetry: otel.telemetry() });
  const tracer = otel.tracerProvider.getTracer('the-agent');
  await tracer.startActiveSpan('handle-request', async (request) => {
    await runtime.run('r-ctx').step({ id: 's', tool: 't', operation: async () => 'ok' });
    request.end();
  });
  const spans = otel.spans();
  const request = spans.find((s) => s.name === 'handle-request');
  const step = spans.find((s) => s.name === 'agent_recovery.step');
  assert.equal(step.parentSpanContext.spanId, request.spanContext().spanId);
  assert.equal(step.spanContext().traceId, request.spanContext().traceId);
  await otel.shutdown();
});

test('a hot swap shows in the policy attributes of the next decision', async () => {
  const otel = sdk();
  const swappable = await Policy.load();
  const runtime = await Runtime.create({ clock: new VirtualClock(T0), seed: 7, policy: swappable, breaker: { failureThreshold: 100 }, telemetry: otel.telemetry() });
  const payments = await Policy.load(artifact('payments-policy'));
  await runtime.run('r-swap').step({
    id: 's', tool: 'payments.charge', call: 'tool',
    operation: async (call) => {
      if (call.attempt === 2) await swappable.swap(artifact('payments-policy'));
      return call.attempt < 3 ? new RawOutcome(UNAVAILABLE) : 'done';
    },
  });
  const attempts = otel.spans().filter((s) => s.name === 'agent_recovery.attempt');
  assert.deepEqual(
    attempts.slice(0, 2).map((s) => s.attributes['agent_recovery.policy.sha256']),
    [(await Policy.load()).describe().sha256, payments.describe().sha256],
  );
  assert.notEqual(payments.info().name, 'agent-recovery-reference');
  assert.equal(attempts[1].attributes['agent_recovery.policy.name'], payments.info().name);
  await otel.shutdown();
});

test('Telemetry.off() and the default (no SDK: the no-op global providers) change nothing in what the run does', async () => {
  const events = async (telemetry) => {
    const runtime = await Runtime.create({ clock: new VirtualClock(T0), seed: 7, ...(telemetry ? { telemetry } : {}) });
    const run = runtime.run('r');
    await run.step({ id: 's', tool: 't', operation: async (call) => (call.attempt < 3 ? new RawOutcome(UNAVAILABLE) : null) });
    return run.events;
  };
  const off = await events(Telemetry.off());
  assert.deepEqual(await events(undefined), off);
  // 3 attempts, 2 decisions, 2 sleeps, ok, outcome.
  assert.equal(off.length, 9);
  // Off means off: an SDK registered globally sees nothing from it.
  const otel = sdk();
  trace.setGlobalTracerProvider(otel.tracerProvider);
  metrics.setGlobalMeterProvider(otel.meterProvider);
  try {
    assert.deepEqual(await events(Telemetry.off()), off);
    assert.equal(otel.spans().length, 0);
    assert.equal((await otel.metrics())?.scopeMetrics.length ?? 0, 0, 'no metric');
    // ... while the default picks the global providers up.
    await events(undefined);
    assert.equal(otel.spans().filter((s) => s.name === 'agent_recovery.attempt').length, 3);
    checkMetricsAgainstDoc(await otel.metrics());
  } finally {
    trace.disable();
    metrics.disable();
    await otel.shutdown();
  }
  // The default made with no SDK at all skips its hooks, yet follows a tracer
  // provider registered later (the API's global tracer is a proxy).
  const runtime = await Runtime.create({ clock: new VirtualClock(T0), seed: 7 });
  const late = sdk();
  trace.setGlobalTracerProvider(late.tracerProvider);
  try {
    await runtime.run('r-late').step({ id: 's', tool: 't', operation: async () => null });
    assert.deepEqual(late.spans().map((s) => s.name), ['agent_recovery.attempt', 'agent_recovery.step']);
  } finally {
    trace.disable();
    await late.shutdown();
  }
});

test('a tracer that samples nothing: no span exported, the metrics still count', async () => {
  const otel = sdk();
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ sampler: new AlwaysOffSampler(), spanProcessors: [new SimpleSpanProcessor(spans)] });
  const runtime = await Runtime.create({ clock: new VirtualClock(T0), seed: 7, telemetry: new Telemetry({ tracerProvider, meterProvider: otel.meterProvider }) });
  const r = await runtime.run('r-off').step({ id: 's', tool: 't', call: 'tool', operation: async (call) => (call.attempt < 3 ? new RawOutcome(UNAVAILABLE) : null) });
  assert.equal(r.outcome, 'ok');
  assert.equal(spans.getFinishedSpans().length, 0);
  const rm = await otel.metrics();
  checkMetricsAgainstDoc(rm);
  assert.deepEqual(
    counter(rm, 'agent_recovery.attempts'),
    points([['agent_recovery.action=retry agent_recovery.call.kind=operation error.type=tool.http.503_unavailable', 2], ['agent_recovery.call.kind=operation', 1]]),
  );
  assert.deepEqual(counter(rm, 'agent_recovery.steps'), [['agent_recovery.step.outcome=ok', 1]]);
  await otel.shutdown();
});

test('a bad telemetry option is refused with invalid_config, naming the value', async () => {
  const kind = (e) => e instanceof PolicyError && e.kind === 'invalid_config';
  await assert.rejects(Runtime.create({ telemetry: 'on' }), (e) => kind(e) && /telemetry must be Telemetry\.global\(\)/.test(e.message));
  await assert.rejects(Runtime.create({ telemetry: { tracerProvider: {} } }), kind);
  assert.throws(() => new Telemetry({ tracerProvider: {} }), (e) => kind(e) && /tracerProvider must have getTracer/.test(e.message));
  assert.throws(() => new Telemetry({ meterProvider: 42 }), (e) => kind(e) && /meterProvider/.test(e.message));
  assert.throws(() => new Telemetry({ tracer: {} }), (e) => kind(e) && /unknown option "tracer"/.test(e.message));
  assert.throws(() => new Telemetry(null), kind);
});

test("between them, the tests above saw every metric of docs/telemetry.md's table", () => {
  // A policy handle's swap counter is the Policy's, not the runtime's: telemetry_swaps.test.mjs.
  const runtime = [...DOC_METRICS.keys()].filter((m) => m !== 'agent_recovery.policy.swaps');
  assert.deepEqual([...seenMetrics].sort(), runtime.sort());
});
