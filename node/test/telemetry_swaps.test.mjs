// A Policy's swaps and refusals as OpenTelemetry span events on the caller's
// span and the `agent_recovery.policy.swaps` counter, through the real
// components and the real OpenTelemetry SDK (its in-memory exporters).
//
// Expected values come from elsewhere than the code under test: names and
// versions from each component's own meta.info, sha256 computed here from the
// files, error codes from docs/hosts.md (another world is `incompatible`,
// bytes that are not wasm `load`), names and attribute sets from the table of
// docs/telemetry.md, "Policy swaps", which the Rust and Python suites read too.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ValueType, context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AggregationTemporality, DataPointType, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Policy, PolicyError, Telemetry } from '../src/index.js';
import { REPO, artifact } from './helpers.mjs';

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const REFERENCE = artifact('agent-recovery-policy');
const PAYMENTS = artifact('payments-policy');
const WRONG_WORLD = artifact('hostile-wrong-world');
const JUNK = new TextEncoder().encode('not a component');

/** The real SDK with in-memory exporters. */
function sdk() {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    telemetry: () => new Telemetry({ tracerProvider, meterProvider }),
    tracer: () => tracerProvider.getTracer('caller'),
    spans: () => spans.getFinishedSpans(),
    /** Runs `f` inside an active span named `request`. */
    inSpan: (f) =>
      tracerProvider.getTracer('caller').startActiveSpan('request', async (span) => {
        try {
          return await f();
        } finally {
          span.end();
        }
      }),
    async metrics() {
      await reader.forceFlush();
      return exporter.getMetrics().at(-1);
    },
  };
}

/** name, version (the component's own meta.info) and sha256 (of the file). */
async function identity(path) {
  const { name, version } = (await Policy.load(path)).info();
  return { name, version, sha256: createHash('sha256').update(readFileSync(path)).digest('hex') };
}

const withPrefix = (prefix, id) => ({ [`${prefix}.name`]: id.name, [`${prefix}.version`]: id.version, [`${prefix}.sha256`]: id.sha256 });

/** docs/telemetry.md, "Policy swaps": span event -> {hosts, attributes (sorted)}. */
function docTable() {
  const doc = readFileSync(join(REPO, 'docs', 'telemetry.md'), 'utf8');
  const at = doc.indexOf('\n## Policy swaps\n');
  assert.ok(at >= 0, 'docs/telemetry.md has "## Policy swaps"');
  const lines = doc.slice(at).split('\n');
  const start = lines.findIndex((l) => l.startsWith('|'));
  const rows = new Map();
  const names = (cell) => [...cell.matchAll(/`([^` ]+\.[^` ]+)`/g)].map((m) => m[1]);
  for (const l of lines.slice(start + 2)) {
    if (!l.startsWith('|')) break;
    const cells = l.slice(1, -1).split(' | ');
    rows.set(names(cells[0])[0], { hosts: cells[2].trim(), attributes: names(cells[3]).sort() });
  }
  return rows;
}

/** The data points of agent_recovery.policy.swaps as [sorted "k=v" attributes, value], sorted. */
function swaps(rm) {
  const m = (rm?.scopeMetrics ?? []).flatMap((sm) => sm.metrics).find((x) => x.descriptor.name === 'agent_recovery.policy.swaps');
  if (m === undefined) return [];
  assert.equal(m.descriptor.unit, '{swap}');
  assert.equal(m.descriptor.valueType, ValueType.INT);
  assert.equal(m.dataPointType, DataPointType.SUM);
  assert.equal(m.isMonotonic, true);
  return m.dataPoints
    .map((dp) => [Object.entries(dp.attributes).map(([k, v]) => `${k}=${v}`).sort().join(' '), dp.value])
    .sort((a, b) => (a[0] < b[0] ? -1 : 1));
}

test('a swap and two refusals inside a span are its events, with the documented attributes, and are counted', async () => {
  const otel = sdk();
  const reference = await identity(REFERENCE);
  const payments = await identity(PAYMENTS);
  assert.equal(payments.name, 'payments-strict');
  const policy = await Policy.load(REFERENCE, { telemetry: otel.telemetry() });
  const errors = await otel.inSpan(async () => {
    await policy.swap(PAYMENTS);
    const refused = [];
    for (const candidate of [WRONG_WORLD, JUNK]) {
      await policy.swap(candidate).then(
        () => assert.fail('the candidate was accepted'),
        (e) => refused.push(e),
      );
    }
    return refused;
  });
  assert.deepEqual(errors.map((e) => e.code), ['incompatible', 'load'], 'docs/hosts.md: another world, not wasm');

  const spans = otel.spans();
  assert.deepEqual(spans.map((s) => s.name), ['request'], 'no span of its own: events on the caller\'s');
  const events = spans[0].events.map((e) => [e.name, e.attributes]);
  const refused = (code, message) => [
    'agent_recovery.policy.refused',
    { ...withPrefix('agent_recovery.policy', payments), 'error.type': code, 'agent_recovery.policy.error.message': message },
  ];
  assert.deepEqual(events, [
    ['agent_recovery.policy.swapped', { ...withPrefix('agent_recovery.policy', payments), ...withPrefix('agent_recovery.swap.from', reference) }],
    refused('incompatible', errors[0].message),
    refused('load', errors[1].message),
  ]);

  // The attribute sets are those of docs/telemetry.md (as in Rust and Python).
  const table = docTable();
  for (const [name, attrs] of events) {
    assert.deepEqual(Object.keys(attrs).sort(), table.get(name).attributes, name);
    assert.match(table.get(name).hosts, /Node/);
  }

  assert.deepEqual(swaps(await otel.metrics()), [
    ['agent_recovery.swap.result=refused error.type=incompatible', 1],
    ['agent_recovery.swap.result=refused error.type=load', 1],
    ['agent_recovery.swap.result=swapped', 1],
  ]);
});

test('swaps run one at a time, each reports on the span active when swap() was called', async () => {
  const otel = sdk();
  const policy = await Policy.load(REFERENCE, { telemetry: otel.telemetry() });
  const [a, b] = [otel.tracer().startSpan('a'), otel.tracer().startSpan('b')];
  const first = context.with(trace.setSpan(context.active(), a), () => policy.swap(PAYMENTS));
  const second = context.with(trace.setSpan(context.active(), b), () => policy.swap(JUNK));
  await first;
  await assert.rejects(second, (e) => e.code === 'load');
  a.end();
  b.end();
  const events = Object.fromEntries(otel.spans().map((s) => [s.name, s.events.map((e) => e.name)]));
  assert.deepEqual(events, { a: ['agent_recovery.policy.swapped'], b: ['agent_recovery.policy.refused'] });
});

test('a swap with no active span is counted only', async () => {
  const otel = sdk();
  const policy = await Policy.load(REFERENCE, { telemetry: otel.telemetry() });
  await policy.swap(PAYMENTS);
  assert.deepEqual(otel.spans(), []);
  assert.deepEqual(swaps(await otel.metrics()), [['agent_recovery.swap.result=swapped', 1]]);
});

test('Telemetry.off(): no span event even inside a span, and swaps work the same; with no SDK neither breaks', async () => {
  const otel = sdk();
  const off = await Policy.load(REFERENCE, { telemetry: Telemetry.off() });
  await otel.inSpan(async () => {
    assert.equal((await off.swap(PAYMENTS)).name, 'payments-strict');
    await assert.rejects(off.swap(WRONG_WORLD), (e) => e.code === 'incompatible');
  });
  assert.deepEqual(otel.spans()[0].events, []);
  assert.equal(off.describe().name, 'payments-strict');
  // The default: the global providers, none registered in this process.
  const global = await Policy.load(REFERENCE);
  assert.equal((await global.swap(PAYMENTS)).name, 'payments-strict');
  await assert.rejects(global.swap(JUNK), (e) => e.code === 'load');
  assert.equal(global.describe().name, 'payments-strict');
});

test('a bad telemetry option is refused with invalid_config', async () => {
  await assert.rejects(Policy.load(REFERENCE, { telemetry: 'on' }), (e) => e instanceof PolicyError && e.kind === 'invalid_config' && /telemetry must be/.test(e.message));
});

test("the table has the four events; swapped and refused in every host", () => {
  const table = docTable();
  assert.deepEqual([...table.keys()].sort(), [
    'agent_recovery.policy.failed',
    'agent_recovery.policy.fell_back',
    'agent_recovery.policy.refused',
    'agent_recovery.policy.swapped',
  ]);
  for (const name of ['agent_recovery.policy.swapped', 'agent_recovery.policy.refused']) assert.equal(table.get(name).hosts, 'Rust, Node, Python');
});
