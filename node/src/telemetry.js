// OpenTelemetry spans and metrics of the recovery runtime. docs/telemetry.md is
// the schema (every span, attribute, span event and metric, and the mapping
// from the driver's effects and the component's events); the Rust twin is
// host/src/runtime/telemetry.rs, with the same names and values.
//
// Telemetry observes; it never decides. It sees what the driver does (each
// `call` effect's start and end on the runtime's clock, each `decide` answer,
// each `append`) and the component's events. Only `@opentelemetry/api` is
// used: with no SDK registered the global providers are no-ops.

import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { ProxyTracerProvider, SpanKind, SpanStatusCode, ValueType, context, createNoopMeter, metrics, trace } from '@opentelemetry/api';
import { describe } from './json.js';
import { checkKeys, invalidConfig } from './step.js';
// The dead-letter stream's appends become `agent_recovery.dead_letter` span events.
import { DEAD_LETTER_STREAM } from './keys.js';

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

/** A run's telemetry: a no-op when off. */
export function runTelemetry(bound, runId) {
  return bound === null ? NOOP_RUN : new RunTel(bound, runId);
}

const NOOP_LANE = Object.freeze({
  branch: () => NOOP_LANE,
  callStart() {},
  callEnd() {},
  decided() {},
  appended() {},
  event() {},
  finish() {},
});
const NOOP_RUN = Object.freeze({ lane: () => NOOP_LANE });

/** The run's telemetry: the span context of each step that ended `ok`, for the compensation chain's links. */
class RunTel {
  constructor(bound, runId) {
    this.bound = bound;
    this.runId = runId;
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

/** SeverityNumber WARN of the OpenTelemetry log data model (api-logs' `SeverityNumber.WARN`). */
const SEVERITY_WARN = 13;

/** Unix ms as an HrTime: never mistaken for a performance.now() reading. */
const hr = (ms) => [Math.floor(ms / 1000), (ms % 1000) * 1e6];

/** `agent_recovery.idempotency_key.hash`: hex sha256 of the key's text, never the key. */
const keyHash = (key) => createHash('sha256').update(key, 'utf8').digest('hex');

const str = (v) => (typeof v === 'string' ? v : undefined);
const int = (v) => (Number.isSafeInteger(v) ? v : undefined);

/** Should the outcome mark the step span as an error? */
const isError = (outcome) => outcome === 'failed' || outcome === 'escalated' || outcome === 'dead_lettered';

/** An event's members as span-event attributes (the key only as its hash). */
function eventAttributes(ev) {
  const a = {};
  const put = (k, v) => {
    if (v !== undefined) a[k] = v;
  };
  put('agent_recovery.step.id', str(ev.step));
  put('agent_recovery.target', str(ev.target));
  put('agent_recovery.attempt', int(ev.attempt));
  put('agent_recovery.call.kind', str(ev.call));
  if (typeof ev.key === 'string') a['agent_recovery.idempotency_key.hash'] = keyHash(ev.key);
  put('agent_recovery.action', str(ev.action));
  put('error.type', str(ev.code));
  put('agent_recovery.delay_ms', int(ev.delay_ms));
  put('agent_recovery.state', str(ev.state));
  return a;
}

/**
 * One lane's spans (the run's steps, or one fan-out branch): the step or
 * fan-out span, an open compensation chain, and the attempt whose span waits
 * for its `ok` or `decision` event.
 */
class LaneTel {
  #run;
  #tel;
  /** The lane's step or fan-out span, or null (a cancellation between steps). */
  #span = null;
  /** The context its children start in: the lane span's, else the parent's. */
  #cx;
  /**
   * Are the lane's spans recorded? Not under a non-recording step span (no
   * SDK, or sampled out): then no attempt or chain span is built, no key
   * hashed, no decision parsed; the metrics still count.
   */
  #recording = true;
  #stepId;
  /** {span, cx, started, failed} */
  #chain = null;
  /** {span (null when not recording), endMs, kind} */
  #attempt = null;
  /** {cls, retryable} of the last decision's envelope. */
  #decided = null;

  constructor(run, parent, what, nowMs) {
    this.#run = run;
    this.#tel = run.bound.tel;
    this.#cx = parent;
    if (what === null) return;
    const attrs = { 'agent_recovery.run.id': run.runId };
    let name = 'agent_recovery.step';
    if (what.fanout) {
      name = 'agent_recovery.fanout';
      attrs['agent_recovery.step.id'] = what.fanout.id;
      attrs['agent_recovery.fanout.min_results'] = what.fanout.minResults;
      attrs['agent_recovery.fanout.branches'] = what.fanout.branches;
    } else if (what.step) {
      const { id, tool, target } = what.step;
      this.#stepId = id;
      attrs['agent_recovery.step.id'] = id;
      attrs['agent_recovery.tool'] = tool;
      attrs['agent_recovery.target'] = target ?? tool;
    }
    Object.assign(attrs, run.bound.policy());
    this.#span = this.#tel.tracer.startSpan(name, { kind: SpanKind.INTERNAL, startTime: hr(nowMs), attributes: attrs }, parent);
    this.#cx = trace.setSpan(parent, this.#span);
    this.#recording = this.#span.isRecording();
  }

  /** A branch of this lane's fan-out (its step spec, JSON text): a step span, child of the fan-out span. */
  branch(specText, clock) {
    let spec;
    try {
      const s = JSON.parse(specText);
      if (typeof s?.id === 'string' && typeof s.tool === 'string') spec = { id: s.id, tool: s.tool, target: str(s.target) };
    } catch {
      // a branch without a readable spec still gets its span, without the step's attributes
    }
    return new LaneTel(this.#run, this.#cx, { step: spec }, clock.nowMs());
  }

  /** A `call` effect starts now: `call` is the operation's argument ({kind, step, target, key, attempt, timeoutMs}). */
  callStart(call, clock) {
    const nowMs = clock.nowMs();
    this.#endAttempt(null);
    if (!this.#recording) {
      this.#attempt = { span: null, endMs: nowMs, kind: call.kind };
      return;
    }
    const parent = this.#chain !== null && call.kind === 'compensation' ? this.#chain.cx : this.#cx;
    const attrs = {
      'agent_recovery.step.id': call.step,
      'agent_recovery.target': call.target,
      'agent_recovery.call.kind': call.kind,
      'agent_recovery.attempt': call.attempt,
      'agent_recovery.idempotency_key.hash': keyHash(call.key),
    };
    if (call.attempt > 1) attrs['http.request.resend_count'] = call.attempt - 1;
    if (int(call.timeoutMs) !== undefined) attrs['agent_recovery.timeout_ms'] = call.timeoutMs;
    const span = this.#tel.tracer.startSpan('agent_recovery.attempt', { kind: SpanKind.INTERNAL, startTime: hr(nowMs), attributes: attrs }, parent);
    this.#attempt = { span, endMs: nowMs, kind: call.kind };
  }

  /** The call returned now; its span ends at this time once its `ok` or `decision` event says how it went. */
  callEnd(clock) {
    if (this.#attempt !== null) this.#attempt.endMs = clock.nowMs();
  }

  /** The active policy answered a `decide` effect with `decision` (JSON text). */
  decided(decision) {
    if (!this.#recording) return;
    this.#decided = null;
    try {
      const env = JSON.parse(decision)?.envelope;
      if (env !== null && typeof env === 'object') this.#decided = { cls: str(env.class) ?? '', retryable: typeof env.retryable === 'boolean' ? env.retryable : undefined };
    } catch {
      // not JSON: the loop reports it; the attempt span just lacks class and retryable
    }
  }

  /** Ends the pending attempt span; `failure` is the decision event when it failed. */
  #endAttempt(failure) {
    const p = this.#attempt;
    if (p === null) return;
    this.#attempt = null;
    // How it failed: the metric's attributes and the span's first ones.
    const failed = failure === null ? null : { 'error.type': str(failure.code) ?? '' };
    if (failed !== null && str(failure.action) !== undefined) failed['agent_recovery.action'] = failure.action;
    if (p.span !== null) {
      if (failed !== null) {
        const attrs = { ...failed };
        if (int(failure.delay_ms) !== undefined) attrs['agent_recovery.delay_ms'] = failure.delay_ms;
        const decided = this.#decided;
        this.#decided = null;
        if (decided !== null) {
          if (decided.cls !== '') attrs['agent_recovery.class'] = decided.cls;
          if (decided.retryable !== undefined) attrs['agent_recovery.retryable'] = decided.retryable;
          Object.assign(attrs, this.#run.bound.policy());
        }
        p.span.setAttributes(attrs);
        p.span.setStatus({ code: SpanStatusCode.ERROR, message: failed['error.type'] });
      }
      p.span.end(hr(p.endMs));
    }
    this.#tel.attempts.add(1, { 'agent_recovery.call.kind': p.kind, ...failed });
  }

  /** An `append` effect: a dead-letter record (JSON text) becomes a span event. */
  appended(stream, record, clock) {
    if (stream !== DEAD_LETTER_STREAM) return;
    const nowMs = clock.nowMs();
    let code;
    try {
      code = str(JSON.parse(record)?.last_envelope?.code);
    } catch {
      // the record is the component's bytes; without a code the event just lacks error.type
    }
    // On the step's own span (the chain's when there is none: a cancellation).
    const span = this.#span ?? this.#chain?.span;
    if (this.#tel.logger !== null) {
      const attributes = { 'agent_recovery.run.id': this.#run.runId };
      if (this.#stepId !== undefined) attributes['agent_recovery.step.id'] = this.#stepId;
      if (code !== undefined) attributes['error.type'] = code;
      this.#tel.logger.emit({
        eventName: 'agent_recovery.dead_letter',
        timestamp: hr(nowMs),
        severityNumber: SEVERITY_WARN,
        severityText: 'WARN',
        body: record,
        attributes,
        context: this.#span ? this.#cx : (this.#chain?.cx ?? this.#cx),
      });
    }
    if (!span?.isRecording()) return;
    const attrs = { 'agent_recovery.dead_letter.record': record };
    if (code !== undefined) attrs['error.type'] = code;
    span.addEvent('agent_recovery.dead_letter', attrs, hr(nowMs));
  }

  /** An event of the component, parsed (docs/runtime.md, "Events"). */
  event(ev, clock) {
    if (ev === null || typeof ev !== 'object' || typeof ev.event !== 'string') return;
    const nowMs = clock.nowMs();
    const tel = this.#tel;
    const code = () => ({ 'error.type': str(ev.code) ?? '' });
    const target = str(ev.target) ?? '';
    switch (ev.event) {
      case 'attempt':
      case 'outcome':
      case 'fanout':
        return;
      case 'ok':
        this.#endAttempt(null);
        return;
      case 'decision': {
        const m = code();
        if (str(ev.action) !== undefined) m['agent_recovery.action'] = ev.action;
        tel.decisions.add(1, m);
        if (this.#attempt !== null) {
          this.#endAttempt(ev);
          return;
        }
        break;
      }
      case 'sleep':
        tel.retryDelay.record(int(ev.delay_ms) ?? 0, { 'agent_recovery.target': target });
        break;
      case 'breaker':
        tel.breaker.add(1, { 'agent_recovery.target': target, 'agent_recovery.breaker.state': str(ev.state) ?? '' });
        break;
      case 'short_circuit':
        tel.shortCircuits.add(1, { 'agent_recovery.target': target });
        break;
      case 'dead_letter':
        tel.deadLetters.add(1, code());
        return;
      case 'compensate':
        this.#compensate(ev, nowMs);
        return;
      default:
    }
    const span = this.#chain?.span ?? this.#span;
    if (span?.isRecording()) span.addEvent(`agent_recovery.${ev.event}`, eventAttributes(ev), hr(nowMs));
  }

  #compensate(ev, nowMs) {
    const failed = ev.state === 'failed';
    this.#tel.compensations.add(1, { 'agent_recovery.compensation.state': failed ? 'failed' : 'started' });
    if (!this.#recording) return;
    if (this.#chain === null) {
      const span = this.#tel.tracer.startSpan(
        'agent_recovery.compensation',
        { kind: SpanKind.INTERNAL, startTime: hr(nowMs), attributes: { 'agent_recovery.run.id': this.#run.runId } },
        this.#cx,
      );
      this.#chain = { span, cx: trace.setSpan(this.#cx, span), started: 0, failed: 0 };
    }
    const chain = this.#chain;
    if (failed) {
      chain.failed += 1;
    } else {
      chain.started += 1;
      const undone = str(ev.step) ?? '';
      const linked = this.#run.done?.get(undone);
      if (linked !== undefined) chain.span.addLink({ context: linked, attributes: { 'agent_recovery.step.id': undone } });
    }
    if (chain.span.isRecording()) chain.span.addEvent('agent_recovery.compensate', eventAttributes(ev), hr(nowMs));
  }

  /** The lane's `finish` effect: ends the open spans. */
  finish(outcome, envelope, clock) {
    const nowMs = clock.nowMs();
    this.#endAttempt(null);
    const chain = this.#chain;
    if (chain !== null) {
      this.#chain = null;
      chain.span.setAttributes({ 'agent_recovery.compensation.count': chain.started, 'agent_recovery.compensation.failed': chain.failed });
      if (chain.failed > 0) chain.span.setStatus({ code: SpanStatusCode.ERROR, message: 'agent_recovery.compensation_failed' });
      chain.span.end(hr(nowMs));
    }
    const span = this.#span;
    // A cancellation between steps: no step of its own to count or end.
    if (span === null) return;
    this.#tel.steps.add(1, { 'agent_recovery.step.outcome': outcome });
    span.setAttribute('agent_recovery.step.outcome', outcome);
    const code = str(envelope?.code);
    if (code !== undefined && outcome !== 'ok') span.setAttribute('error.type', code);
    if (isError(outcome)) span.setStatus({ code: SpanStatusCode.ERROR, message: code ?? outcome });
    if (outcome === 'ok' && this.#stepId !== undefined) (this.#run.done ??= new Map()).set(this.#stepId, span.spanContext());
    span.end(hr(nowMs));
  }
}
