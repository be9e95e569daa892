// The recovery loop: the reference component's `agent:recovery/runtime@0.2.0`
// export, a sans-I/O state machine (docs/runtime.md). Whatever policy decides,
// the loop always comes from the shipped reference (a 0.1 policy has no
// runtime export), instantiated on its own, beside any policy instance.

import { compileReference, instantiate } from './component.js';
import { PolicyError, PolicyLoadError, PolicyRuntimeError, isComponentError } from './errors.js';

const INTERFACE = 'agent:recovery/runtime@0.2.0';

/** One instance of the loop; a trap drops it and the next call makes a fresh one. */
export class LoopComponent {
  #compiled;
  #api = null;
  /** Traps seen so far (each one replaced the instance). */
  traps = 0;

  constructor(compiled) {
    this.#compiled = compiled;
    this.#api = bind(compiled);
  }

  /** The loop of the reference built into gen/ (`npm run build`). */
  static async load() {
    return new LoopComponent(await compileReference());
  }

  /** `advance(state, input)`: `{state, effects}` (both JSON text). */
  advance(state, input) {
    return this.#call('advance', (api) => api.advance(state, input));
  }

  /** `check-outcome(outcome)`: the failure's envelope (JSON text), or undefined for a success. */
  checkOutcome(outcome) {
    const out = this.#call('check-outcome', (api) => api.checkOutcome(outcome));
    return out === null ? undefined : out;
  }

  #call(what, fn) {
    if (this.#api === null) {
      try {
        this.#api = bind(this.#compiled);
      } catch (e) {
        throw new PolicyRuntimeError(`the recovery loop could not be re-instantiated after a trap (${e.message})`, { cause: e });
      }
    }
    try {
      return fn(this.#api);
    } catch (e) {
      if (isComponentError(e)) {
        const err = PolicyError.fromPayload(e.payload);
        err.message = `the recovery loop refused an input in ${what}: ${err.message}`;
        throw err;
      }
      this.#api = null;
      this.traps += 1;
      throw new PolicyRuntimeError(
        `the recovery loop failed in \`${what}\` (${e?.message ?? e}); this is a bug, report it with the input (the instance is replaced on the next call)`,
        { cause: e },
      );
    }
  }
}

function bind(compiled) {
  const root = instantiate(compiled);
  const api = root?.[INTERFACE];
  if (!api || typeof api.advance !== 'function' || typeof api.checkOutcome !== 'function') {
    throw new PolicyLoadError(
      'contract',
      `the reference in gen/ does not export ${INTERFACE}; rebuild it (\`npm run build\` in node/)`,
    );
  }
  return api;
}
