// A run: drives the loop component's effects, nothing more (docs/runtime.md,
// "The driver"). The twin of host/src/runtime/run.rs and driver.rs.

import { PolicyRuntimeError } from './errors.js';
import { elementMembers, elementSpans, parseLossless, rawMembers } from './json.js';
import { failedText, passesThrough, resultOf } from './outcome.js';
import { fromError } from './observe.js';
import { describe } from './json.js';
import { checkMs, checkName, invalidArg, prepareStep, preparedText, specText } from './step.js';
import { StoreError, asyncFace, compareAndSetFromLoop } from './store.js';
import { recordDeadLetterDepth, runTelemetry } from './telemetry.js';
import { DEAD_LETTER_STREAM, depthEvent, depthOf, operationsOf } from './deadletters.js';

function badEffect(what) {
  return new PolicyRuntimeError(`the recovery loop emitted a malformed effect (${what}); this is a bug, please report it`, {
    code: 'invalid-output',
  });
}

const q = (s) => JSON.stringify(s);
/** The `attempt` input of a call with nothing to call (`unknown_tool`, `no_compensation`). */
const nothingToCall = (rt, result) => `{"input":"attempt","now_ms":${rt.clock.nowMs()},"result":"${result}"}`;
/** Resolves on the event loop's next turn (after pending timers and I/O). */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Only `startRun` (that is, `runtime.run`) makes a Run. */
const token = Symbol('Runtime.run');

/** A new run of `rt` (a Runtime): `runtime.run(runId, options)`. */
export function startRun(rt, runId, options) {
  return new Run(token, rt, runId, options);
}

/** @internal A run resumed from its journaled state (`runtime.recover`): no `run` input. */
export function resumeRun(rt, runId, state) {
  return new Run(token, rt, runId, {}, state);
}

/** @internal `run[STEP_AND_END](prepared)`: a door's step and the run's end, in one turn. */
export const STEP_AND_END = Symbol('Run.stepAndEnd');
/** @internal `run[RECOVER](operations, tools)`: feed the `recover` input (docs/durability.md §2). */
export const RECOVER = Symbol('Run.recover');
/**
 * @internal `runtime.run(id, {[WITH_FIRST_STEP]: true})`: a run that starts
 * with its step (a door's run of one step): its `run` input, sent with that
 * step as every run's is (docs/runtime.md, "Inputs"), carries no `started_ms`.
 * `false`: the `run` input is sent at once, alone (the scenario runner's
 * `run`, then the steps).
 */
export const WITH_FIRST_STEP = Symbol('Run.withFirstStep');
/** @internal `runtime.run(id, {[KILL_AFTER_CALLS]: n})`: the scenario member `kill_after_calls`. */
export const KILL_AFTER_CALLS = Symbol('kill_after_calls');

/** @internal What a run killed by KILL_AFTER_CALLS rejects with: it stopped as if its process died. */
export class RunKilled extends Error {
  constructor(calls) {
    super(`the run was killed at its call ${calls} (scenario kill_after_calls)`);
    this.name = 'RunKilled';
  }
}

/** @internal `run[DEAD_LETTERS]`: [{id, record}] this run appended to the dead-letter stream. */
export const DEAD_LETTERS = Symbol('Run.deadLetters');

const NO_REPORT = Object.freeze({});

/**
 * @internal The operation of a tool `recover` or a replay has no operations
 * for, and the compensation of a replayed step whose operations lack one:
 * never called, the call is answered `unknown_tool` or `no_compensation`
 * and the loop makes the failure (docs/runtime.md, "Inputs").
 */
export const UNKNOWN_TOOL = Object.freeze(() => undefined);
/** @internal See UNKNOWN_TOOL. */
export const NO_COMPENSATION = Object.freeze(() => undefined);

/** A run of steps under one run id (`runtime.run(runId)`). */
export class Run {
  #rt;
  /** The store's asynchronous face (the effects' reads and writes). */
  #store;
  #holder = { state: '', events: [], branch: false, deadLetters: [], lastTms: 0 };
  /** The compensations of the steps that ended ok, by step id (made at the first). */
  #undo = null;
  /** The run's cancellation as an AbortSignal, made when a sleep first needs one (most runs never sleep). */
  #cancel = null;
  /** Whether the run was cancelled. */
  #aborted = false;
  /** Who waits for the cancellation: the race of an operation in progress. */
  #onAbort = new Set();
  #cancelAtMs;
  #finished;
  #busy = null;
  #ids = new Set();
  /** Spans and metrics (docs/telemetry.md): observes, never decides. */
  #tel;
  #killAt;
  #calls = 0;
  /** The `run` input is still to be sent (with the first step, or alone before another input). */
  #unstarted = false;
  /** When the run started, for a `run` input sent later. */
  #startedMs = undefined;
  /** Every event so far, as the component's JSON text (docs/runtime.md, "Events"); a fan-out's in branch order. */
  get events() {
    return this.#holder.events;
  }
  /** The run id. */
  runId;
  /** @internal */
  get [DEAD_LETTERS]() {
    return this.#holder.deadLetters;
  }

  constructor(key, rt, runId, { signal, cancelAtMs, [KILL_AFTER_CALLS]: killAt, [WITH_FIRST_STEP]: withFirstStep } = {}, resumed = undefined) {
    if (key !== token) throw new TypeError('use runtime.run(runId) to start a run');
    this.#rt = rt;
    this.#store = asyncFace(rt.store);
    this.#killAt = killAt;
    this.runId = runId;
    this.#tel = runTelemetry(rt.telemetry, runId, rt.loop);
    if (cancelAtMs !== undefined && cancelAtMs !== null) {
      checkMs('cancelAtMs', cancelAtMs);
      this.#cancelAtMs = cancelAtMs;
    }
    if (signal !== undefined && signal !== null) {
      if (typeof signal.aborted !== 'boolean') throw invalidArg(`signal must be an AbortSignal, got ${describe(signal)}`);
      if (signal.aborted) this.#abort();
      else signal.addEventListener('abort', () => this.#abort(), { once: true });
    }
    if (resumed !== undefined) {
      this.#holder.state = resumed;
      return;
    }
    if (withFirstStep === false) {
      this.#holder.state = rt.loop.advance('', `${this.#runInput()}}`).state;
      return;
    }
    // The `run` input goes with the first step (one loop call fewer; the
    // configuration was checked by Runtime.create), carrying when the run
    // started (docs/runtime.md, "Inputs"); a door's run starts with its step.
    this.#unstarted = true;
    if (withFirstStep !== true) this.#startedMs = rt.clock.nowMs();
  }

  /** The `run` input's text less its closing brace (its first step may follow). */
  #runInput() {
    const rt = this.#rt;
    const now = rt.clock.nowMs();
    const started = this.#startedMs === undefined || this.#startedMs === now ? '' : `,"started_ms":${this.#startedMs}`;
    return `{"input":"run","now_ms":${now}${started},"run_id":${q(this.runId)},"seed":${rt.seed === 'null' ? 'null' : rt.seed},"config":${rt.config}`;
  }

  /** Send the `run` input alone when it is still to be sent. */
  #started() {
    if (!this.#unstarted) return;
    this.#unstarted = false;
    this.#holder.state = this.#rt.loop.advance('', `${this.#runInput()}}`).state;
  }

  /** The run's state as the loop returned it (JSON text; do not edit it). */
  get state() {
    this.#started();
    return this.#holder.state;
  }

  /** The outcome that ended the run, or undefined while it goes on. */
  get finished() {
    return this.#finished;
  }

  /** Cancel when the clock reaches `nowMs` (Unix ms); a sleep crossing it is cut short there. */
  cancelAt(nowMs) {
    checkMs('cancelAt nowMs', nowMs);
    this.#cancelAtMs = nowMs;
  }

  #abort() {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#cancel?.abort();
    for (const f of this.#onAbort) f();
    this.#onAbort.clear();
  }

  /** The run's cancellation signal (aborted at once when the run already was). */
  #signal() {
    if (this.#cancel === null) {
      this.#cancel = new AbortController();
      if (this.#aborted) this.#cancel.abort();
    }
    return this.#cancel.signal;
  }

  #cancelled() {
    return this.#aborted || (this.#cancelAtMs !== undefined && this.#rt.clock.nowMs() >= this.#cancelAtMs);
  }

  /**
   * Run a step to its end and report how it ended:
   * `{outcome, runFinished, result, envelope, rendered, token, value}`.
   * Rejects only when the loop, the policy or the store failed, or the options are wrong.
   */
  step(step) {
    return this.#step(prepareStep(step), false);
  }

  /**
   * @internal A step already prepared (`prepareStep`) sent with `"end": true`:
   * the loop ends the run when the step finishes, in the same `advance` (a
   * door's run of one step). Resolves to the step's report.
   */
  [STEP_AND_END](prepared) {
    return this.#step(prepared, true);
  }

  #step(prepared, andEnd) {
    const { step } = prepared;
    return this.#exclusive(async () => {
      this.#claimIds([step.id]);
      const tel = this.#tel.lane({ step: { id: step.id, tool: step.tool, target: step.target } }, this.#rt.clock);
      const ctx = { step, last: undefined, tel };
      const members = `"read_stops_batch":true,"step":${preparedText(prepared)}${andEnd ? ',"end":true' : ''}}`;
      // The run not started yet: the `run` input carries its first step.
      const input = this.#unstarted ? `${this.#runInput()},${members}` : `{"input":"step","now_ms":${this.#rt.clock.nowMs()},${members}`;
      this.#unstarted = false;
      const report = this.#end(await this.#drive(this.#holder, input, ctx));
      if (report.outcome === 'ok' && typeof step.compensate === 'function') this.#compensates(step);
      return report;
    });
  }

  /**
   * A fan-out: `steps` run concurrently (one after another on a VirtualClock,
   * for determinism), each as its own little run with its own breaker target;
   * it succeeds when at least `minResults` of them do. The report's `result`
   * is an array with each branch's result (null where it did not end ok).
   */
  fanout(id, minResults, steps) {
    if (typeof id !== 'string' || id === '') throw invalidArg(`fanout id must be a non-empty string, got ${describe(id)}`);
    checkName('fanout.id', id);
    if (!Array.isArray(steps) || steps.length === 0) throw invalidArg('fanout needs a non-empty array of steps');
    if (!Number.isSafeInteger(minResults) || minResults < 1) {
      throw invalidArg(`fanout minResults must be a positive integer, got ${JSON.stringify(minResults) ?? describe(minResults)}`);
    }
    const prepared = steps.map((s, i) => prepareStep(s, `fanout branch ${i}`));
    return this.#exclusive(async () => {
      this.#claimIds([id, ...prepared.map((p) => p.spec.id)]);
      const byId = new Map(prepared.map((p) => [p.spec.id, p.step]));
      const tel = this.#tel.lane({ fanout: { id, minResults, branches: steps.length } }, this.#rt.clock);
      const ctx = { step: null, branches: byId, last: undefined, tel };
      const spec = { id, min_results: minResults, branches: prepared.map((p) => p.spec) };
      this.#started();
      const input = `{"input":"fanout","now_ms":${this.#rt.clock.nowMs()},"fanout":${specText(spec)}}`;
      return this.#end(await this.#drive(this.#holder, input, ctx));
    });
  }

  /**
   * Cancel the run: no new attempts, the compensations of the completed steps
   * run (in reverse order), the outcome is `cancelled`. During a step, the step
   * in progress ends `cancelled` and its report is returned; between steps,
   * the compensations run now.
   */
  async cancel() {
    this.#abort();
    if (this.#busy !== null) {
      try {
        return await this.#busy;
      } catch {
        // the step's own caller sees its error
      }
    }
    return this.#exclusive(() => this.#between('cancel'));
  }

  /**
   * End the run: the caller says it is complete (docs/durability.md §1). Its
   * journal entry is deleted, so `recover` leaves it alone. A run that is
   * never ended stays in the journal and a later `recover` rolls it back.
   * Between steps only; a run that already ended resolves with its outcome.
   * Resolves to a report with outcome `completed`.
   */
  end() {
    return this.#exclusive(() => this.#between('end'));
  }

  /** Feed an input of no step (`cancel`, `end`, `recover`) and carry out its effects. */
  async #between(input, ctx = {}) {
    this.#started();
    ctx.tel = this.#tel.lane(null, this.#rt.clock);
    return this.#end(await this.#drive(this.#holder, `{"input":"${input}","now_ms":${this.#rt.clock.nowMs()}}`, { step: null, last: undefined, ...ctx }));
  }

  /**
   * @internal Drive the journaled state with the `recover` input; calls find
   * their operations by the tool the `call` effect names, in `operations`.
   * Resolves to the finish report plus `deadLetters` ([{id, record}] appended
   * by the run).
   */
  [RECOVER](operations) {
    return this.#exclusive(async () => ({ ...(await this.#between('recover', { operations, tools: new Map() })), deadLetters: this.#holder.deadLetters }));
  }

  #compensates(step) {
    this.#undo ??= new Map();
    this.#undo.set(step.id, step.compensate);
  }

  /** Step ids are unique in a run (docs/runtime.md, "Inputs"). */
  #claimIds(ids) {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (this.#ids.has(id) || ids.indexOf(id) !== i) {
        throw invalidArg(
          `step id ${JSON.stringify(id)} is used twice in run ${JSON.stringify(this.runId)}; step ids are unique in a run (to resume a step that ended awaiting_input, start a new run with the same run id)`,
        );
      }
    }
    for (const id of ids) this.#ids.add(id);
  }

  #end(report) {
    if (report.runFinished) this.#finished = report.outcome;
    return report;
  }

  /** Run `body` when no other is running, a turn of the event loop later; a run that ended resolves with its outcome instead. */
  async #exclusive(body) {
    if (this.#busy !== null) {
      throw invalidArg('a step of this run is still in progress; the steps of a run go one after another (await each step, or use fanout)');
    }
    // One turn of the event loop first: a step whose store, clock and
    // operation all resolve at once (a cache hit, MemoryStore, VirtualClock)
    // runs on microtasks only, so a loop of them would starve timers and I/O.
    const p = nextTurn().then(() => (this.#finished === undefined ? body() : afterTheEnd(this.#finished)));
    this.#busy = p;
    try {
      return await p;
    } finally {
      this.#busy = null;
    }
  }

  #cancelInput() {
    return `{"input":"cancel","now_ms":${this.#rt.clock.nowMs()}}`;
  }

  /**
   * Feed `input`, carry out the effects, answer the last one, until `finish`.
   * A step sent with `end` finishes, then the run's end follows in the same
   * batch (its journal delete, its `finish`): the step's report is returned,
   * the run is over.
   */
  async #drive(holder, input, ctx) {
    try {
      return await this.#driveLane(holder, input, ctx);
    } finally {
      // The lane's telemetry maps what it observed (its `finish` did already, unless it failed).
      ctx.tel?.flush();
    }
  }

  async #driveLane(holder, input, ctx) {
    let step;
    for (;;) {
      const adv = this.#rt.loop.advance(holder.state, input);
      holder.state = adv.state;
      const effects = effectsOf(adv.effects, adv.state);
      let next;
      for (let i = 0; i < effects.length; i++) {
        const fx = effects[i];
        if (step !== undefined && fx.effect === 'finish') {
          this.#finished = String(fx.outcome ?? '');
          return step;
        }
        let answer = this.#effect(fx, ctx, holder);
        if (isThenable(answer)) answer = await answer;
        if (answer === NO_REPORT) continue;
        if (answer instanceof StopBatch) {
          next = answer.input; // a failed claim, a read that found a value: the batch ends
          break;
        }
        if (typeof answer === 'string') next = answer;
        else if (i < effects.length - 1) step = answer;
        else return answer;
      }
      if (next === undefined) throw badEffect('a batch without an effect to answer');
      input = next;
    }
  }

  /**
   * Carry out one effect: NO_REPORT, the input that answers it, or the step's
   * report; or a promise of one. The effects most steps are made of (events,
   * store reads and writes, the finish) are carried out without a promise
   * when the store answers at once (a MemoryStore, a SqliteStore), the
   * others by #effectAsync.
   */
  #effect(fx, ctx, holder) {
    const rt = this.#rt;
    const raw = fx[RAW];
    switch (fx.effect) {
      case 'emit': {
        if (raw.event === undefined) throw badEffect('emit without event');
        holder.events.push(raw.event);
        if (Number.isSafeInteger(fx.event?.t_ms)) holder.lastTms = fx.event.t_ms;
        if (rt.onEvent) rt.onEvent(fx.event, raw.event);
        ctx.tel.event(raw.event, rt.clock);
        return NO_REPORT;
      }
      case 'read': {
        if (!Array.isArray(fx.keys)) throw badEffect('read without keys');
        return sequence(read(this.#store, fx.keys, rt.clock.nowMs(), fx.go_on_if_absent === true));
      }
      case 'write': {
        if (typeof fx.key !== 'string' || raw.value === undefined) throw badEffect('write without key or value');
        return sequence(put(this.#store, fx.key, raw.value, fx.ttl_ms ?? null, rt.clock.nowMs()));
      }
      case 'claim': {
        if (typeof fx.key !== 'string' || raw.value === undefined) throw badEffect('claim without key or value');
        const now = rt.clock.nowMs();
        return then(compareAndSetFromLoop(this.#store, fx.key, null, raw.value, fx.ttl_ms ?? null, now), (cas) =>
          cas.written
            ? `{"input":"claimed","now_ms":${now},"ok":true}`
            : new StopBatch(`{"input":"claimed","now_ms":${now},"ok":false,"current":${cas.current?.value ?? 'null'}}`),
        );
      }
      case 'swap': {
        // A compare-and-set the loop re-applies itself on a conflict (a breaker update).
        if (typeof fx.key !== 'string' || raw.value === undefined) throw badEffect('swap without key or value');
        const now = rt.clock.nowMs();
        return then(compareAndSetFromLoop(this.#store, fx.key, fx.expected ?? null, raw.value, fx.ttl_ms ?? null, now), (cas) => {
          if (cas.written) return `{"input":"swapped","now_ms":${now},"ok":true,"version":${cas.version}}`;
          if (!cas.current) return `{"input":"swapped","now_ms":${now},"ok":false,"current":null,"version":null}`;
          return `{"input":"swapped","now_ms":${now},"ok":false,"current":${cas.current.value},"version":${cas.current.version}}`;
        });
      }
      case 'delete': {
        if (typeof fx.key !== 'string') throw badEffect('delete without key');
        return then(this.#store.delete(fx.key), () => NO_REPORT);
      }
      case 'finish': {
        ctx.tel.finish(String(fx.outcome ?? ''), fx.envelope, rt.clock);
        return {
          outcome: String(fx.outcome ?? ''),
          runFinished: fx.run_finished ?? true,
          result: fx.result === undefined || fx.result === null ? null : resultValue(raw.result, fx.result),
          envelope: fx.envelope ?? null,
          rendered: fx.rendered ?? null,
          token: fx.token ?? null,
          /** The operation's own JS value for an `ok` from a call in this run (e.g. a fetch Response); undefined when cached. */
          value: fx.outcome === 'ok' ? ctx.last : undefined,
        };
      }
      default:
        if (fx.effect !== 'call') return this.#effectAsync(fx, ctx, holder);
        if (this.#killAt === undefined) return this.#callEffect(fx, ctx, holder);
        // A scenario's kill: the call was carried out, nothing more happens (no answer, no effect).
        return this.#callEffect(fx, ctx, holder).then((answer) => {
          if (++this.#calls >= this.#killAt) throw new RunKilled(this.#calls);
          return answer;
        });
    }
  }

  /** The other effects (#effect). */
  async #effectAsync(fx, ctx, holder) {
    const rt = this.#rt;
    const raw = fx[RAW];
    switch (fx.effect) {
      case 'append': {
        if (typeof fx.stream !== 'string' || raw.record === undefined) throw badEffect('append without stream or record');
        const now = rt.clock.nowMs();
        const seq = await this.#store.append(fx.stream, raw.record, now);
        ctx.tel.appended(fx.stream, raw.record, rt.clock);
        if (fx.stream === DEAD_LETTER_STREAM) {
          holder.deadLetters.push({ id: String(seq), record: raw.record });
          // The depth, read once (awaited) when the gauge or the depth event needs it.
          const wanted = !(rt.telemetry === null || rt.telemetry === undefined || rt.telemetry.tel.inert()) || rt.depthThreshold != null;
          const depth = wanted ? await Promise.resolve(depthOf(rt, this.#store, now)).then((n) => ({ n }), (error) => ({ error })) : undefined;
          const depthNow = () => {
            if (depth.error !== undefined) throw depth.error;
            return depth.n;
          };
          recordDeadLetterDepth(rt.telemetry, depthNow);
          // The only event a runtime makes itself: only the store knows the sequence number.
          const ev = depthEvent(rt, seq, raw.record, holder.lastTms, depthNow, fx.depth_threshold);
          if (ev !== undefined) {
            holder.events.push(ev.text);
            if (rt.onEvent) rt.onEvent(ev.event, ev.text);
            ctx.tel.event(ev.text, rt.clock);
          }
        }
        return NO_REPORT;
      }
      case 'decide': {
        if (typeof fx.observation !== 'string' || typeof fx.context !== 'string') throw badEffect('decide without observation or context');
        const decision = await rt.decider.decideJson(fx.observation, fx.context);
        if (typeof decision !== 'string') throw badEffect('the policy returned a decision that is not JSON text');
        ctx.tel.decided(decision);
        // The decision log's `policy`: who decided, when the runtime knows.
        const who = rt.decisionLog ? rt.decisionLog.policy() : '';
        return `{"input":"decision","now_ms":${rt.clock.nowMs()},"decision":${decision}${who}}`;
      }
      case 'log': {
        if (typeof fx.line !== 'string') throw badEffect('log without line');
        if (rt.decisionLog) await rt.decisionLog.write(fx.line);
        return NO_REPORT;
      }
      case 'sleep': {
        const ms = fx.ms ?? 0;
        const cancellable = fx.cancellable ?? true;
        if (cancellable && this.#cancelled()) return this.#cancelInput();
        const at = this.#cancelAtMs;
        if (cancellable && at !== undefined && rt.clock.nowMs() + ms > at) {
          await rt.clock.sleepMs(Math.max(0, at - rt.clock.nowMs()), this.#signal());
          return this.#cancelInput();
        }
        await rt.clock.sleepMs(ms, cancellable ? this.#signal() : undefined);
        if (cancellable && this.#aborted) return this.#cancelInput();
        return `{"input":"slept","now_ms":${rt.clock.nowMs()}}`;
      }
      case 'restore': {
        const hook = (ctx.operations ? this.#recovered(ctx, fx) : this.#stepOf(ctx, fx.step))?.checkpoint;
        let ok = false;
        if (typeof hook === 'function') {
          try {
            ok = (await hook()) !== false;
          } catch (e) {
            if (passesThrough(e)) throw e;
            ok = false;
          }
        }
        return `{"input":"restored","now_ms":${rt.clock.nowMs()},"ok":${ok}}`;
      }
      case 'fork':
        return this.#fork(fx, ctx, holder);
      default:
        throw badEffect(String(fx.effect));
    }
  }

  /** In a recovered run: the operations of the tool of the step an effect is about (undefined: none given). */
  #recovered(ctx, fx) {
    const tool = this.#toolOf(ctx, fx);
    return tool === undefined ? undefined : operationsOf(ctx.operations, tool);
  }

  /** The tool of the step an effect is about: a `call` names it (and is remembered for a later `restore`). */
  #toolOf(ctx, fx) {
    const step = String(fx.step ?? '');
    if (typeof fx.tool === 'string') {
      ctx.tools.set(step, fx.tool);
      return fx.tool;
    }
    return ctx.tools.get(step);
  }

  /** The step (with its hooks) a call or restore is about. */
  #stepOf(ctx, id) {
    if (ctx.step && (id === undefined || ctx.step.id === id)) return ctx.step;
    return ctx.branches?.get(id) ?? ctx.step;
  }

  async #callEffect(fx, ctx, holder) {
    const rt = this.#rt;
    const kind = String(fx.call ?? '');
    const compensation = kind === 'compensation';
    if (!compensation && this.#cancelled()) return this.#cancelInput();
    const timeoutMs = fx.timeout_ms ?? null;
    // The attempt's AbortSignal, made when the operation first reads it (most
    // never do); aborted at once when the attempt was abandoned before that.
    let attemptCtl;
    let abandoned;
    const abandon = (reason) => {
      if (attemptCtl === undefined) abandoned = reason;
      else attemptCtl.abort(reason);
    };
    const call = {
      kind,
      step: String(fx.step ?? ''),
      target: String(fx.target ?? ''),
      key: String(fx.key ?? ''),
      attempt: fx.attempt ?? 1,
      timeoutMs,
      get signal() {
        if (attemptCtl === undefined) {
          attemptCtl = new AbortController();
          if (abandoned !== undefined) attemptCtl.abort(abandoned);
        }
        return attemptCtl.signal;
      },
    };
    ctx.tel.callStart(call, rt.clock);
    let fn;
    const recovered = ctx.operations ? this.#recovered(ctx, fx) : undefined;
    // Nothing to call (`unknown_tool`, `no_compensation`): the loop makes the failure.
    if (ctx.operations && recovered === undefined) return nothingToCall(rt, 'unknown_tool');
    if (compensation) {
      fn = holder.branch ? undefined : (this.#undo?.get(call.step) ?? recovered?.compensate);
      if (fn === undefined || fn === NO_COMPENSATION) return nothingToCall(rt, 'no_compensation');
    } else {
      fn = (recovered ?? this.#stepOf(ctx, call.step))?.operation;
      if (fn === UNKNOWN_TOOL) return nothingToCall(rt, 'unknown_tool');
      if (typeof fn !== 'function') throw badEffect(`a call of step ${call.step}, which has no operation here`);
    }
    const started = rt.clock.nowMs();
    const virtual = rt.clock.virtual === true;
    // The operation, settled into {value} or {error}: at once when it returned
    // something that is not a promise (nothing to race), else raced against
    // the attempt's timeout and the run's cancellation.
    let first;
    let pending;
    try {
      const value = fn(call);
      if ((typeof value === 'object' && value !== null) || typeof value === 'function') {
        if (typeof value.then === 'function') pending = value;
        else first = { value };
      } else {
        first = { value };
      }
    } catch (error) {
      first = { error };
    }
    if (first !== undefined) {
      // Cancelled while it ran (the operation cancelled its own run): as a race would have it.
      if (!compensation && this.#aborted) first = { cancelled: true };
    } else {
      // One promise settled by the first of: the operation, the attempt's
      // timeout (real clocks only), the run's cancellation.
      let timer;
      let onCancel;
      first = await new Promise((resolve) => {
        Promise.resolve(pending).then(
          (value) => resolve({ value }),
          (error) => resolve({ error }),
        );
        if (timeoutMs !== null && !virtual) timer = setTimeout(() => resolve({ timedOut: true }), timeoutMs);
        if (compensation) return;
        if (this.#aborted) return resolve({ cancelled: true });
        onCancel = () => resolve({ cancelled: true });
        this.#onAbort.add(onCancel);
      });
      clearTimeout(timer);
      if (onCancel) this.#onAbort.delete(onCancel);
    }
    ctx.tel.callEnd(rt.clock);
    if (first.cancelled) {
      abandon(new DOMException('the run was cancelled', 'AbortError'));
      return this.#cancelInput();
    }
    // How long it took: the loop judges it against the call's timeout.
    const took = Math.max(0, rt.clock.nowMs() - started);
    if (first.timedOut) {
      abandon(new DOMException(`the attempt timed out after ${timeoutMs} ms`, 'TimeoutError'));
      return `{"input":"attempt","now_ms":${rt.clock.nowMs()},"took_ms":${took},"result":"timed_out"}`;
    }
    let result;
    if ('error' in first) {
      if (passesThrough(first.error)) throw first.error;
      result = failedText(fromError(first.error, { call: undefined, timeoutMs: timeoutMs ?? undefined }));
    } else {
      result = resultOf(first.value);
      if (typeof result !== 'string') result = await result;
      if (!compensation) ctx.last = first.value;
    }
    return `{"input":"attempt","now_ms":${rt.clock.nowMs()},"took_ms":${took},"result":${result}}`;
  }

  /**
   * The `fork` effect: drive every branch as its own little run (concurrently,
   * or one after another from the fork's time on a VirtualClock), then answer
   * `joined` with each branch's final state, in branch order.
   */
  async #fork(fx, ctx, holder) {
    const rt = this.#rt;
    if (!Array.isArray(fx.branches)) throw badEffect('fork without branches');
    if (holder.branch || ctx.branches === undefined) throw badEffect('fork outside a fan-out');
    if (fx.branches.length !== ctx.branches.size) throw badEffect('fork with a different number of branches');
    const forkAt = rt.clock.nowMs();
    const branchesText = fx[RAW].branches ?? '[]';
    const rawBranches = elementSpans(branchesText);
    const branchRaw = fx.branches.map((b, i) => {
      const span = rawBranches[i];
      const r = span ? rawMembers(branchesText.slice(span[0], span[1])) : {};
      if (typeof b?.state !== 'string' || r.step === undefined) throw badEffect('a fork branch without state or step');
      return { state: b.state, stepText: r.step, id: b.step?.id };
    });
    // Each branch is a lane of its own: its state, its events (appended to the
    // run's in branch order once all are done, as Rust does), no compensations
    // of its own (the run compensates after the join).
    const lanes = [];
    const runBranch = async (b, now) => {
      const lane = { state: b.state, events: [], branch: true, deadLetters: holder.deadLetters, lastTms: holder.lastTms };
      lanes.push(lane);
      const step = ctx.branches?.get(b.id);
      const bctx = { step: step ?? null, branches: ctx.branches, last: undefined, tel: ctx.tel.branch(b.stepText, rt.clock) };
      const report = await this.#drive(lane, `{"input":"step","now_ms":${now},"read_stops_batch":true,"step":${b.stepText}}`, bctx);
      return { lane, report, step };
    };
    let ends;
    if (rt.clock.virtual === true && typeof rt.clock.set === 'function') {
      ends = [];
      let latest = forkAt;
      try {
        for (const b of branchRaw) {
          rt.clock.set(forkAt);
          ends.push(await runBranch(b, forkAt));
          latest = Math.max(latest, rt.clock.nowMs());
        }
      } catch (e) {
        // A scenario's kill: the branches' events so far stay, as in Rust and Python.
        if (e instanceof RunKilled) for (const lane of lanes) holder.events.push(...lane.events);
        throw e;
      }
      rt.clock.set(latest);
    } else {
      ends = await Promise.all(branchRaw.map((b) => runBranch(b, rt.clock.nowMs())));
    }
    const states = [];
    for (const { lane, report, step } of ends) {
      holder.events.push(...lane.events);
      if (report.outcome === 'ok' && typeof step?.compensate === 'function') this.#compensates(step);
      states.push(lane.state);
    }
    return `{"input":"joined","now_ms":${rt.clock.nowMs()},"states":[${states.map(q).join(',')}]}`;
  }
}

// ------------------------------------------------------------------ raw JSON text

/** Where each effect's members are kept as the component's text, by name (passed on unchanged). */
const RAW = Symbol('raw effect members');

/**
 * @internal A batch of effects (the loop's JSON text): each effect's members parsed,
 * and kept as text under RAW. The text is read once: its members are found in
 * one pass and parsed one by one, except a value to store, only handed on as
 * text (the store checks it; a MemoryStore its size only, see
 * compareAndSetFromLoop). `state`: the state the loop returned with the
 * batch, which a journal entry's value holds (found in one comparison).
 */
export function effectsOf(text, state = '') {
  let members;
  try {
    members = elementMembers(text, state.charCodeAt(0) === 123 ? state : undefined);
  } catch (e) {
    throw badEffect(e instanceof SyntaxError && e.message === 'not an array' ? 'not an array' : 'not JSON');
  }
  const effects = new Array(members.length);
  for (let i = 0; i < members.length; i++) {
    const raw = members[i];
    if (raw === null) throw badEffect('not an object');
    const fx = {};
    try {
      for (const name of Object.keys(raw)) if (name !== 'value') fx[name] = member(raw[name]);
    } catch {
      throw badEffect('not JSON');
    }
    fx[RAW] = raw;
    effects[i] = fx;
  }
  return effects;
}

/** One member's value: most are plain strings, null, booleans or small integers, read without the JSON parser. */
function member(text) {
  const c = text.charCodeAt(0);
  if (c === 34 && text.indexOf('\\') === -1) {
    if (text.length < 2 || text.charCodeAt(text.length - 1) !== 34) throw new SyntaxError('unterminated string');
    return text.slice(1, -1);
  }
  if (text === 'null') return null;
  if (text === 'true') return true;
  if (text === 'false') return false;
  if (c >= 49 && c <= 57 && text.length < 16 && DIGITS.test(text)) return Number(text);
  return JSON.parse(text);
}

/** A positive integer as JSON writes it (no leading zero: the first digit is checked first). */
const DIGITS = /^\d+$/;

/** A finish's result; integers beyond 2^53 are kept exact (as BigInt). */
function resultValue(raw, parsed) {
  return raw !== undefined && /\d{16}/.test(raw) ? parseLossless(raw) : parsed;
}

function afterTheEnd(outcome) {
  return { outcome, runFinished: true, result: null, envelope: null, rendered: null, token: null, value: undefined };
}

/** Last-writer-wins put on top of compare-and-set (of a value from an effect). */
function* put(store, key, value, ttlMs, now) {
  for (let i = 0; i < 16; i++) {
    const current = yield store.get(key, now);
    if ((yield compareAndSetFromLoop(store, key, current ? current.version : null, value, ttlMs, now)).written) return NO_REPORT;
  }
  throw new StoreError('unavailable', `could not write ${key}: 16 compare-and-set conflicts in a row; the store is contended, retry the run`);
}

/**
 * An answer that ends its batch (none of its later effects is made): a
 * `claim` that failed, a `read` marked `go_on_if_absent` that found a value.
 * Every `read` answer and every step input say the runtime does so
 * (`claim_stops_batch`, `read_stops_batch`), so the loop may send a step's
 * first read, its claim and its call in one batch (docs/runtime.md, "A
 * claim in the call's batch").
 */
class StopBatch {
  constructor(input) {
    this.input = input;
  }
}

/**
 * The `read` effect's answer: the keys read one after another. `goOn` (the
 * effect's `go_on_if_absent`): NO_REPORT when every key is absent, else the
 * answer ends the batch.
 */
function* read(store, keys, now, goOn) {
  const values = [];
  const versions = [];
  for (const k of keys) {
    const got = yield store.get(k, now);
    values.push(`${q(k)}:${got?.value ?? 'null'}`);
    if (got) versions.push(`${q(k)}:${got.version}`);
  }
  if (goOn && versions.length === 0) return NO_REPORT;
  const answer = `{"input":"read","now_ms":${now},"values":{${values.join(',')}},"versions":{${versions.join(',')}},"claim_stops_batch":true}`;
  return goOn ? new StopBatch(answer) : answer;
}

function isThenable(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function';
}

/**
 * `f(v)`, at once when `v` is a value, or when the promise `v` resolves: a
 * store that answers at once (a MemoryStore) is read and written without a
 * promise; a store that answers later is awaited as ever.
 */
export function then(v, f) {
  return isThenable(v) ? Promise.resolve(v).then(f) : f(v);
}

/**
 * Run a generator that yields store answers (values or promises), sending
 * each back as `then` would: its result at once while every answer is a
 * value, else a promise of it. One body for a store's synchronous face and
 * its asynchronous one (`asyncFace`).
 */
export function sequence(gen, step = gen.next()) {
  while (!step.done) {
    if (isThenable(step.value)) {
      return Promise.resolve(step.value).then(
        (v) => sequence(gen, gen.next(v)),
        (e) => sequence(gen, gen.throw(e)),
      );
    }
    step = gen.next(step.value);
  }
  return step.value;
}
