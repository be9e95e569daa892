// OpenTelemetry spans and metrics of the recovery runtime. docs/telemetry.md is
// the schema (every span, attribute, span event and metric, and the mapping
// from the driver's effects and the component's events); the Rust twin is
// host/src/runtime/telemetry.rs, with the same names and values.
//
// Telemetry observes; it never decides. It sees what the driver does (each
// `call` effect's start and end on the runtime's clock, each `decide` answer,
// each `append`) and the component's events. Only `@opentelemetry/api` is
// used: with no SDK registered the global providers are no-ops.

import { createRequire } from 'node:module';
import { ProxyTracerProvider, SpanKind, SpanStatusCode, ValueType, context, createNoopMeter, metrics, trace } from '@opentelemetry/api';
import { describe } from './json.js';
import { checkKeys, invalidConfig } from './step.js';

/** The instrumentation scope (tracer and meter name) of every span and instrument. */
export const SCOPE_NAME = 'agent-recovery';
const SCOPE_VERSION = createRequire(import.meta.url)('../package.json').version;


const OFF = Symbol('Telemetry.off');

// The API's no-op providers, recognised with its public API only: a proxy with
// no delegate hands out the no-op tracer provider; the no-op meter's class.
const NOOP_TRACER_PROVIDER = new ProxyTracerProvider().getDelegate();
const NoopMeter = createNoopMeter().constructor;

/** The members `new Telemetry()` takes. */
export const TELEMETRY_PROVIDERS = ['tracerProvider', 'meterProvider', 'loggerProvider'];

/**
 * Where a Runtime sends its spans and metrics (the `telemetry` option).
 *
 * `Telemetry.global()`, the default: the API's global tracer and meter
 * providers, read when the runtime is created (no-ops until your program
 * registers an SDK). `new Telemetry({tracerProvider, meterProvider})`: these
 * providers (either may be left out: the global one). `Telemetry.off()`:
 * nothing at all, not even the no-op calls.
 */
export class Telemetry {
  /** @internal The tracer and instruments, or null when off. */
  instruments;

  constructor(providers = {}) {
    if (providers === OFF) {
      this.instruments = null;
      return;
    }
    if (providers === null || typeof providers !== 'object') {
      throw invalidConfig(`new Telemetry() takes {tracerProvider, meterProvider}, got ${describe(providers)}`);
    }
    checkKeys(providers, TELEMETRY_PROVIDERS, 'new Telemetry()');
    const { tracerProvider = trace.getTracerProvider(), meterProvider = metrics.getMeterProvider(), loggerProvider } = providers;
    if (loggerProvider !== undefined && typeof loggerProvider?.getLogger !== 'function') {
      throw invalidConfig(`loggerProvider must have getLogger(name, version) (e.g. a LoggerProvider of @opentelemetry/sdk-logs), got ${describe(loggerProvider)}`);
    }
    if (typeof tracerProvider?.getTracer !== 'function') {
      throw invalidConfig(`tracerProvider must have getTracer(name, version) (e.g. a BasicTracerProvider), got ${describe(tracerProvider)}`);
    }
    if (typeof meterProvider?.getMeter !== 'function') {
      throw invalidConfig(`meterProvider must have getMeter(name, version) (e.g. a MeterProvider), got ${describe(meterProvider)}`);
    }
    const meter = meterProvider.getMeter(SCOPE_NAME, SCOPE_VERSION);
    this.instruments = instruments(tracerProvider.getTracer(SCOPE_NAME, SCOPE_VERSION), meter);
    // A log record per dead-letter write, only with an explicit loggerProvider
    // (as in Rust, whose API has no global one; docs/telemetry.md).
    this.instruments.logger = loggerProvider === undefined ? null : loggerProvider.getLogger(SCOPE_NAME, SCOPE_VERSION);
    // Nothing can record while the meter is the API's no-op and the tracer
    // provider is (or proxies to) the no-op one: then a run skips every hook.
    // The global tracer is a proxy, so a provider registered later is seen.
    const noopMeter = meter instanceof NoopMeter;
    this.instruments.inert = () =>
      loggerProvider === undefined &&
      noopMeter && (tracerProvider === NOOP_TRACER_PROVIDER || (tracerProvider instanceof ProxyTracerProvider && tracerProvider.getDelegate() === NOOP_TRACER_PROVIDER));
  }

  /** The global providers as they are now (the default of `Runtime.create`). */
  static global() {
    return new Telemetry();
  }

  /** No spans, no metrics, no calls into OpenTelemetry at all. */
  static off() {
    return new Telemetry(OFF);
  }
}

function instruments(tracer, meter) {
  const counter = (name, unit, description) => meter.createCounter(name, { unit, description, valueType: ValueType.INT });
  return {
    tracer,
    meter,
    attempts: counter('agent_recovery.attempts', '{attempt}', 'Calls made: operation, fallback and compensation attempts'),
    decisions: counter('agent_recovery.decisions', '{decision}', 'Decisions on failures, by code and action'),
    retryDelay: meter.createHistogram('agent_recovery.retry.delay', { unit: 'ms', description: 'Waits before the next call', valueType: ValueType.INT }),
    breaker: counter('agent_recovery.breaker.transitions', '{transition}', 'Circuit breaker state changes, by target and new state'),
    shortCircuits: counter('agent_recovery.short_circuits', '{call}', "Calls not made because the target's breaker was open"),
    deadLetters: counter('agent_recovery.dead_letters', '{record}', 'Dead-letter records written, by code'),
    compensations: counter('agent_recovery.compensations', '{compensation}', 'Compensations started, and those that still failed'),
    deadLetterDepth: meter.createGauge('agent_recovery.dead_letter.depth', {
      unit: '{record}',
      description: 'Dead-letter records not yet closed (replayed successfully or purged)',
      valueType: ValueType.INT,
    }),
    steps: counter('agent_recovery.steps', '{step}', 'Steps and fan-outs ended, by outcome'),
  };
}

/**
 * A Policy's swap telemetry (docs/telemetry.md, "Policy swaps"): the
 * `telemetry` option of `Policy.load` (default the global providers, read
 * then), or null when off. Each swap and refusal is a span event on the span
 * that was active when `swap()` was called (none when there is none or it is
 * not recording), and is counted in `agent_recovery.policy.swaps` with the
 * option's meter.
 */
export function policyTelemetry(option) {
  const tel = instrumentsOf(option);
  if (tel === null) return null;
  const { meter } = tel;
  let swaps;
  const count = (attributes) => {
    swaps ??= meter.createCounter('agent_recovery.policy.swaps', {
      unit: '{swap}',
      description: 'Policy candidates a handle activated or refused',
      valueType: ValueType.INT,
    });
    swaps.add(1, attributes);
  };
  const event = (cx, name, attributes) => {
    const span = trace.getSpan(cx);
    if (span !== undefined && span.isRecording()) span.addEvent(name, attributes);
  };
  return {
    /** The caller's context, taken when `swap()` is called. */
    context: () => context.active(),
    /** A candidate is now active: `from` and `to` are identities ({name, version, sha256}). */
    swapped(cx, from, to) {
      count({ 'agent_recovery.swap.result': 'swapped' });
      event(cx, 'agent_recovery.policy.swapped', { ...identityAttrs('agent_recovery.policy', to), ...identityAttrs('agent_recovery.swap.from', from) });
    },
    /** A candidate was refused with `error`; `active` keeps answering. */
    refused(cx, active, error) {
      const code = typeof error?.code === 'string' ? error.code : 'load';
      count({ 'agent_recovery.swap.result': 'refused', 'error.type': code });
      event(cx, 'agent_recovery.policy.refused', {
        ...identityAttrs('agent_recovery.policy', active),
        'error.type': code,
        'agent_recovery.policy.error.message': String(error?.message ?? error),
      });
    },
  };
}

function identityAttrs(prefix, id) {
  return { [`${prefix}.name`]: id.name, [`${prefix}.version`]: id.version, [`${prefix}.sha256`]: id.sha256 };
}

/**
 * The runtime's telemetry (the `telemetry` option, default the global
 * providers) bound to the policy that decides, or null when off.
 */
export async function bindTelemetry(option, decider) {
  const tel = instrumentsOf(option);
  return tel === null ? null : { tel, policy: await policySource(decider) };
}

/** The instruments of a `telemetry` option (default the global providers, read now), or null when off. */
function instrumentsOf(option) {
  const tel = option === undefined || option === null ? Telemetry.global() : option;
  if (!(tel instanceof Telemetry)) {
    throw invalidConfig(`telemetry must be Telemetry.global(), Telemetry.off() or new Telemetry({tracerProvider, meterProvider}), got ${describe(option)}`);
  }
  return tel.instruments;
}

/**
 * The `agent_recovery.policy.*` attributes, as a function: a Policy's active
 * component when asked (a hot swap shows), an IsolatedPolicy's identity read
 * once, none for a custom decider.
 */
async function policySource(decider) {
  const attrs = (d) =>
    typeof d?.name === 'string' && typeof d.version === 'string' && typeof d.sha256 === 'string'
      ? { 'agent_recovery.policy.name': d.name, 'agent_recovery.policy.version': d.version, 'agent_recovery.policy.sha256': d.sha256 }
      : null;
  if (typeof decider?.describe !== 'function') return () => null;
  try {
    const d = decider.describe();
    if (typeof d?.then !== 'function') {
      return () => {
        try {
          return attrs(decider.describe());
        } catch {
          return null;
        }
      };
    }
    const fixed = attrs(await d);
    return () => fixed;
  } catch {
    return () => null;
  }
}

/**
 * Record the `agent_recovery.dead_letter.depth` gauge when the runtime's
 * telemetry can record; `depth()` is only called then (it reads the store).
 * Telemetry never fails what it observes: a store error records nothing.
 */
export function recordDeadLetterDepth(bound, depth) {
  if (bound === null || bound === undefined || bound.tel.inert()) return;
  let value;
  try {
    value = depth();
  } catch {
    return;
  }
  bound.tel.deadLetterDepth.record(value);
}

/** A run's telemetry: a no-op when off. `loop` is the LoopComponent whose `mapLaneJson` maps each lane. */
export function runTelemetry(bound, runId, loop) {
  return bound === null ? NOOP_RUN : new RunTel(bound, runId, loop);
}

const NOOP_LANE = Object.freeze({
  branch: () => NOOP_LANE,
  callStart() {},
  callEnd() {},
  decided() {},
  appended() {},
  event() {},
  finish() {},
  flush() {},
});
const NOOP_RUN = Object.freeze({ lane: () => NOOP_LANE });

/** The run's telemetry: the span context of each step that ended `ok`, for the compensation chain's links. */
class RunTel {
  constructor(bound, runId, loop) {
    this.bound = bound;
    this.runId = runId;
    this.loop = loop;
    this.done = null;
  }

  /**
   * A lane whose span is a child of the active context: `what` is
   * `{step: {id, tool, target}}`, `{fanout: {id, minResults, branches}}`, or
   * null for a cancellation between steps (no span of its own).
   */
  lane(what, clock) {
    if (this.bound.tel.inert()) return NOOP_LANE;
    return new LaneTel(this, context.active(), what, clock.nowMs());
  }
}

/** Unix ms as an HrTime: never mistaken for a performance.now() reading. */
const hr = (ms) => [Math.floor(ms / 1000), (ms % 1000) * 1e6];

const str = (v) => (typeof v === 'string' ? v : undefined);

/** The `agent_recovery.policy.*` attributes as the mapping's policy identity. */
function identity(attrs) {
  if (attrs === null || attrs === undefined) return null;
  return { name: attrs['agent_recovery.policy.name'], version: attrs['agent_recovery.policy.version'], sha256: attrs['agent_recovery.policy.sha256'] };
}

/** The mapping's typed attributes as an attributes object. */
function attributes(list) {
  const a = {};
  for (const { key, value } of list) {
    if ('text' in value) a[key] = value.text;
    else if ('int' in value) a[key] = value.int;
    else if ('float' in value) a[key] = value.float;
    else if ('flag' in value) a[key] = value.flag;
  }
  return a;
}

const SLOTS = { lane: 0, chain: 1, attempt: 2 };

/**
 * One lane's telemetry (the run's steps, or one fan-out branch): what the
 * driver observed, mapped to instructions by the component's `map-lane-json`
 * (docs/telemetry.md, "The mapping"), and the live spans those instructions
 * name. Observations are kept until the lane ends or forks, then mapped in
 * one call; every span and event carries its own time.
 */
class LaneTel {
  #run;
  #tel;
  /** The context the lane started in (a branch: its fan-out's span). */
  #ambient;
  #state = '';
  #pending = [];
  /** Live spans by slot: [{span, cx}] for lane, chain, attempt. */
  #live = [null, null, null];
  #lastMs;

  constructor(run, ambient, what, nowMs) {
    this.#run = run;
    this.#tel = run.bound.tel;
    this.#ambient = ambient;
    this.#lastMs = nowMs;
    let kind = 'bare';
    if (what?.fanout) kind = { fanout: { id: what.fanout.id, min_results: what.fanout.minResults, branches: what.fanout.branches } };
    else if (what?.step) kind = { step: { id: what.step.id, tool: what.step.tool, target: str(what.step.target) ?? null } };
    this.#observe(nowMs, { lane: { run_id: run.runId, kind, policy: identity(run.bound.policy()) } });
  }

  #observe(nowMs, kind) {
    this.#lastMs = nowMs;
    this.#pending.push({ now_ms: nowMs, kind });
  }

  /** A branch of this lane's fan-out (its step spec, JSON text): a step span, child of the fan-out span. */
  branch(specText, clock) {
    this.flush();
    let spec;
    try {
      const s = JSON.parse(specText);
      if (typeof s?.id === 'string' && typeof s.tool === 'string') spec = { id: s.id, tool: s.tool, target: str(s.target) };
    } catch {
      // a branch without a readable spec: a span without the step's attributes
    }
    const ambient = this.#live[0]?.cx ?? this.#ambient;
    return new LaneTel(this.#run, ambient, spec === undefined ? { step: { id: '', tool: '' } } : { step: spec }, clock.nowMs());
  }

  /** A `call` effect starts now: `call` is the operation's argument ({kind, step, target, key, attempt, timeoutMs}). */
  callStart(call, clock) {
    const c = { role: call.kind, step: call.step, target: call.target, key: call.key, attempt: call.attempt };
    if (Number.isSafeInteger(call.timeoutMs) && call.timeoutMs >= 0) c.timeout_ms = call.timeoutMs;
    this.#observe(clock.nowMs(), { call_start: c });
  }

  /** The call returned now. */
  callEnd(clock) {
    this.#observe(clock.nowMs(), 'call_end');
  }

  /** The active policy answered a `decide` effect with `decision` (JSON text). */
  decided(decision) {
    this.#observe(this.#lastMs, { decided: { decision, policy: identity(this.#run.bound.policy()) } });
  }

  /** An `append` effect. */
  appended(stream, record, clock) {
    if (typeof stream !== 'string' || typeof record !== 'string') return;
    this.#observe(clock.nowMs(), { append: { stream, record } });
  }

  /** An event of the component, its JSON text (docs/runtime.md, "Events"). */
  event(text, clock) {
    if (typeof text !== 'string') return;
    this.#observe(clock.nowMs(), { event: text });
  }

  /** The lane's `finish` effect: ends the open spans. */
  finish(outcome, envelope, clock) {
    const env = envelope === undefined || envelope === null ? null : JSON.stringify(envelope);
    this.#observe(clock.nowMs(), { finish: { outcome, envelope: env } });
    this.flush();
  }

  /** Maps the observations kept so far and carries out the instructions; telemetry never fails what it observes. */
  flush() {
    if (this.#pending.length === 0) return;
    const obs = JSON.stringify(this.#pending);
    this.#pending = [];
    let out;
    try {
      out = this.#run.loop.mapLaneJson(this.#state, obs);
    } catch {
      return;
    }
    this.#state = out.state;
    for (const i of JSON.parse(out.instructions)) this.#apply(i);
  }

  /** The live span under `key` when it records, else undefined. */
  #recording(key) {
    const l = this.#live[SLOTS[key]];
    return l !== null && l.span.isRecording() ? l : undefined;
  }

  /** Carries out one instruction (the rules are in wit/agent-recovery@0.3.0/telemetry.wit). */
  #apply(i) {
    const tel = this.#tel;
    const [op] = Object.keys(i);
    const x = i[op];
    const live = x.key === undefined || x.key === null ? undefined : this.#live[SLOTS[x.key]];
    switch (op) {
      case 'start_span': {
        let parent = this.#ambient;
        if (x.parent !== null) {
          const p = this.#recording(x.parent);
          if (p === undefined) return;
          parent = p.cx;
        }
        const span = tel.tracer.startSpan(x.name, { kind: SpanKind.INTERNAL, startTime: hr(x.start_ms), attributes: attributes(x.attributes) }, parent);
        this.#live[SLOTS[x.key]] = { span, cx: trace.setSpan(parent, span) };
        return;
      }
      case 'add_event': {
        const l = this.#recording(x.key);
        if (l !== undefined) l.span.addEvent(x.name, attributes(x.attributes), hr(x.time_ms));
        return;
      }
      case 'add_link': {
        const linked = this.#run.done?.get(x.step);
        if (live !== null && live !== undefined && linked !== undefined) live.span.addLink({ context: linked, attributes: attributes(x.attributes) });
        return;
      }
      case 'set_attributes':
        if (live) live.span.setAttributes(attributes(x.attributes));
        return;
      case 'set_error':
        if (live) live.span.setStatus({ code: SpanStatusCode.ERROR, message: x.description });
        return;
      case 'end_span':
        if (live) {
          this.#live[SLOTS[x.key]] = null;
          live.span.end(hr(x.end_ms));
        }
        return;
      case 'remember_step':
        if (live) (this.#run.done ??= new Map()).set(x.step, live.span.spanContext());
        return;
      case 'record_metric': {
        const m = METRICS[x.instrument];
        if (m !== undefined) m(tel, x.value, attributes(x.attributes));
        return;
      }
      case 'emit_log': {
        if (tel.logger === null) return;
        const cx = x.key === null ? this.#ambient : live?.cx;
        tel.logger.emit({
          eventName: x.event_name,
          timestamp: hr(x.time_ms),
          severityNumber: x.severity_number,
          severityText: x.severity_text,
          body: x.body,
          attributes: attributes(x.attributes),
          context: cx ?? this.#ambient,
        });
        return;
      }
      default:
    }
  }
}

/** Each instrument of the mapping's `record_metric`, by name. */
const METRICS = {
  'agent_recovery.attempts': (t, v, a) => t.attempts.add(v, a),
  'agent_recovery.decisions': (t, v, a) => t.decisions.add(v, a),
  'agent_recovery.retry.delay': (t, v, a) => t.retryDelay.record(v, a),
  'agent_recovery.breaker.transitions': (t, v, a) => t.breaker.add(v, a),
  'agent_recovery.short_circuits': (t, v, a) => t.shortCircuits.add(v, a),
  'agent_recovery.dead_letters': (t, v, a) => t.deadLetters.add(v, a),
  'agent_recovery.compensations': (t, v, a) => t.compensations.add(v, a),
  'agent_recovery.steps': (t, v, a) => t.steps.add(v, a),
  'agent_recovery.dead_letter.depth': (t, v, a) => t.deadLetterDepth.record(v, a),
};
