// The recovery loop: the reference component's `agent:recovery/runtime@0.2.0`
// export, a sans-I/O state machine (docs/runtime.md). Whatever policy decides,
// the loop always comes from the shipped reference (a 0.1 policy has no
// runtime export), instantiated on its own, beside any policy instance.
//
// Its two functions are called straight on the core instance, with the
// component model's canonical ABI for their two signatures (strings in, a
// result of strings out) written out below: jco's generated wrappers make
// a task object and a few closures per call for the component model's async
// support, which this loop never uses (about a third of a call's time).
// jco's wrappers stay the reference: `LoopComponent.load({ bindings: 'jco' })`
// uses them, and a test runs the loop vectors through both.

import { compileReference, instantiate } from './component.js';
import { PolicyError, PolicyLoadError, PolicyRuntimeError, isComponentError } from './errors.js';

const INTERFACE = 'agent:recovery/runtime@0.2.0';
const TELEMETRY = 'agent:recovery/telemetry@0.3.0';
/** Scripted scenarios' parsing and validation (`parse`), through jco's wrapper: it runs once per scenario. */
const SCENARIO = 'agent:recovery/scenario@0.3.0';
/** The dead-letter lifecycle rules (docs/durability.md §3), called through jco's bindings. */
const DEAD_LETTERS = 'agent:recovery/dead-letters@0.3.0';

/** One instance of the loop; a trap drops it and the next call makes a fresh one. */
export class LoopComponent {
  #compiled;
  #direct;
  #api = null;
  /** Traps seen so far (each one replaced the instance). */
  traps = 0;

  constructor(compiled, { bindings = 'direct' } = {}) {
    if (bindings !== 'direct' && bindings !== 'jco') throw new TypeError(`bindings is 'direct' or 'jco', got ${bindings}`);
    this.#compiled = compiled;
    this.#direct = bindings === 'direct';
    this.#api = bind(compiled, this.#direct);
  }

  /** The loop of the reference built into gen/ (`npm run build`). */
  static async load(options) {
    return new LoopComponent(await compileReference(), options);
  }

  /** Which bindings the calls go through: 'direct' (the canonical ABI, below) or 'jco'. */
  get bindings() {
    return this.#api?.bindings ?? (this.#direct ? 'direct' : 'jco');
  }

  /** `advance(state, input)`: `{state, effects}` (both JSON text). */
  advance(state, input) {
    const api = this.#api ?? this.#rebind();
    try {
      return api.advance(state, input);
    } catch (e) {
      throw this.#failed('advance', e);
    }
  }

  /**
   * `map-lane-json(state, observations)` of `telemetry@0.3.0`: `{state,
   * instructions}` (both JSON text; docs/telemetry.md, "The mapping").
   */
  mapLaneJson(state, observations) {
    const api = this.#api ?? this.#rebind();
    if (typeof api.mapLaneJson !== 'function') {
      throw new PolicyLoadError('contract', `the reference in gen/ does not export ${TELEMETRY}; rebuild it (\`npm run build\` in node/)`);
    }
    try {
      return api.mapLaneJson(state, observations);
    } catch (e) {
      throw this.#failed('map-lane-json', e);
    }
  }

  /** `check-outcome(outcome)`: the failure's envelope (JSON text), or undefined for a success. */
  checkOutcome(outcome) {
    const api = this.#api ?? this.#rebind();
    try {
      const out = api.checkOutcome(outcome);
      return out === null ? undefined : out;
    } catch (e) {
      throw this.#failed('check-outcome', e);
    }
  }

  /**
   * `parse(text)` of `scenario@0.3.0`: `{ plan }` (the validated scenario, as
   * jco lifts it: camelCase records, u64 as BigInt, variants as `{tag, val}`)
   * or `{ message }` when the scenario is not valid.
   */
  parseScenario(text) {
    const api = this.#api ?? this.#rebind();
    try {
      return { plan: api.parseScenario(text) };
    } catch (e) {
      if (isComponentError(e)) return { message: e.payload.message };
      throw this.#failed('parse', e);
    }
  }

  /**
   * A call of the dead-letter rules: `call(api)` with jco's bindings of
   * `dead-letters@0.3.0` (u64 as BigInt). An `err` result is thrown as jco's
   * ComponentError (its `payload` the `dead-letter-error`); a trap replaces
   * the instance, as for `advance`.
   */
  deadLetters(what, call) {
    const api = this.#api ?? this.#rebind();
    try {
      return call(api.deadLetters);
    } catch (e) {
      if (isComponentError(e)) throw e;
      throw this.#failed(what, e);
    }
  }

  #rebind() {
    try {
      this.#api = bind(this.#compiled, this.#direct);
    } catch (e) {
      throw new PolicyRuntimeError(`the recovery loop could not be re-instantiated after a trap (${e.message})`, { cause: e });
    }
    return this.#api;
  }

  #failed(what, e) {
    if (isComponentError(e)) {
      const err = PolicyError.fromPayload(e.payload);
      err.message = `the recovery loop refused an input in ${what}: ${err.message}`;
      return err;
    }
    this.#api = null;
    this.traps += 1;
    return new PolicyRuntimeError(
      `the recovery loop failed in \`${what}\` (${e?.message ?? e}); this is a bug, report it with the input (the instance is replaced on the next call)`,
      { cause: e },
    );
  }
}

function bind(compiled, direct) {
  let core;
  const root = instantiate(compiled, (instance) => {
    if (typeof instance.exports[`${INTERFACE}#advance`] === 'function') core = instance.exports;
  });
  const api = root?.[INTERFACE];
  if (!api || typeof api.advance !== 'function' || typeof api.checkOutcome !== 'function') {
    throw new PolicyLoadError(
      'contract',
      `the reference in gen/ does not export ${INTERFACE}; rebuild it (\`npm run build\` in node/)`,
    );
  }
  // The telemetry mapping (`map-lane-json`), through jco's bindings: called
  // only while telemetry records, once per lane.
  const mapLaneJson = root?.[TELEMETRY]?.mapLaneJson;
  const parseScenario = root?.[SCENARIO]?.parse;
  if (typeof parseScenario !== 'function') {
    throw new PolicyLoadError('contract', `the reference in gen/ does not export ${SCENARIO}; rebuild it (\`npm run build\` in node/)`);
  }
  const deadLetters = root[DEAD_LETTERS];
  if (!deadLetters || typeof deadLetters.apply !== 'function') {
    throw new PolicyLoadError('contract', `the reference in gen/ does not export ${DEAD_LETTERS}; rebuild it (\`npm run build\` in node/)`);
  }
  if (direct && core !== undefined) {
    const lean = directCalls(core);
    if (lean !== null) return { ...lean, mapLaneJson, parseScenario, deadLetters };
  }
  return { bindings: 'jco', advance: api.advance, checkOutcome: api.checkOutcome, mapLaneJson, parseScenario, deadLetters };
}

// ------------------------------------------------------------------ the canonical ABI of the two calls

/** WIT `error-kind`, in its declared order (the discriminant is the index). */
const ERROR_KINDS = Object.freeze([
  'invalid-json',
  'invalid-observation',
  'invalid-context',
  'invalid-config',
  'invalid-argument',
  'too-large',
  'internal',
]);

/** What an `err` result is thrown as: the shape of jco's ComponentError (a `payload`), so callers treat both alike. */
class Refused extends Error {
  constructor(payload) {
    super(`${payload.kind}: ${payload.message}`);
    Object.defineProperty(this, 'payload', { value: payload });
  }
}

/**
 * `advance` and `check-outcome` on the core instance's exports, or null when
 * they are not all there (then jco's wrappers are used). A string parameter
 * is lowered as (pointer, length) of its UTF-8 bytes in memory the guest
 * allocates (`cabi_realloc`); the result is read from the return area the
 * call returns (a discriminant byte, then pointers and lengths), and handed
 * back with the function's `cabi_post_` export, which frees it.
 */
function directCalls(exports) {
  const memory = exports.memory;
  const realloc = exports.cabi_realloc;
  const advance = exports[`${INTERFACE}#advance`];
  const postAdvance = exports[`cabi_post_${INTERFACE}#advance`];
  const check = exports[`${INTERFACE}#check-outcome`];
  const postCheck = exports[`cabi_post_${INTERFACE}#check-outcome`];
  if (!(memory instanceof WebAssembly.Memory) || ![realloc, advance, postAdvance, check, postCheck].every((f) => typeof f === 'function')) {
    return null;
  }
  // Views of the memory, made again when it grew (growing detaches the old buffer).
  let buffer = null;
  let bytes;
  let view;
  const views = () => {
    if (memory.buffer !== buffer) {
      buffer = memory.buffer;
      bytes = Buffer.from(buffer);
      view = new DataView(buffer);
    }
  };
  // The last lowered string's pointer and length.
  let ptr = 0;
  let len = 0;
  const lower = (s) => {
    if (typeof s !== 'string') throw new TypeError(`expected a string, received [${typeof s}]`);
    len = Buffer.byteLength(s, 'utf8'); // a lone surrogate counts as U+FFFD, as it is written
    if (len === 0) {
      ptr = 1; // the canonical ABI's pointer for an empty list
      return;
    }
    ptr = realloc(0, 0, 1, len);
    views();
    if (bytes.write(s, ptr, len, 'utf8') !== len) throw new Error('failed to encode whole string');
  };
  const text = (at) => {
    const p = view.getUint32(at, true);
    return bytes.toString('utf8', p, p + view.getUint32(at + 4, true));
  };
  // A `result<T, error>` in the return area at `ret`: `ok(ret)` reads T; the area is handed back with `post`.
  const result = (ret, post, ok) => {
    views();
    let out;
    let err;
    switch (bytes[ret]) {
      case 0:
        out = ok(ret);
        break;
      case 1:
        err = ERROR_KINDS[bytes[ret + 4]];
        if (err === undefined) throw new TypeError('invalid discriminant specified for ErrorKind');
        err = new Refused({ kind: err, message: text(ret + 8) });
        break;
      default:
        throw new TypeError('invalid variant discriminant for expected');
    }
    post(ret);
    if (err !== undefined) throw err;
    return out;
  };
  const advanced = (ret) => ({ state: text(ret + 4), effects: text(ret + 12) });
  const checked = (ret) => {
    if (bytes[ret + 4] > 1) throw new TypeError('invalid variant discriminant for option');
    return bytes[ret + 4] === 0 ? undefined : text(ret + 8);
  };
  return {
    bindings: 'direct',
    advance(state, input) {
      lower(state);
      const p0 = ptr;
      const l0 = len;
      lower(input);
      return result(advance(p0, l0, ptr, len), postAdvance, advanced);
    },
    checkOutcome(outcome) {
      lower(outcome);
      return result(check(ptr, len), postCheck, checked);
    },
  };
}
