// What an operation returns, as the `result` member of the loop's `attempt`
// input (docs/runtime.md, "Inputs"): a plain value succeeds, Failed and
// RawOutcome are explicit, raw SDK and fetch results are judged by the component.

import { PolicyError, PolicyRuntimeError, RecoveryError } from './errors.js';
import { exactStringify } from './json.js';
import { failureOf, fromResponse } from './observe.js';
import { StoreError } from './store.js';

/** An explicit failure: answered `{"failed": observation}` (an observation object or its JSON text). */
export class Failed {
  constructor(observation) {
    this.observation = observation;
  }
}

/**
 * A raw outcome for the component to judge: answered `{"response": outcome}`
 * (a 200 carrying a refusal fails, a 304 succeeds). An observation-shaped
 * object or its JSON text.
 */
export class RawOutcome {
  constructor(outcome) {
    this.outcome = outcome;
  }
}

/**
 * The former name of {@link RawOutcome}: the same class.
 * @deprecated Use `RawOutcome`; `Response` shadows fetch's global `Response`.
 */
export const Response = RawOutcome;

/** Errors that say the recovery machinery failed (not the operation): they pass through a step. */
export function passesThrough(e) {
  return e instanceof PolicyError || e instanceof PolicyRuntimeError || e instanceof StoreError || e instanceof RecoveryError;
}

/** The JSON text of an operation's value; a value with no JSON form is recorded as null. */
function valueText(v) {
  if (v === undefined) return 'null';
  try {
    return exactStringify(v, 'result') ?? 'null';
  } catch {
    return 'null'; // the report's `value` keeps the value itself
  }
}

/**
 * An observation as JSON text. One JSON cannot carry (text that is not JSON,
 * NaN, a cycle, a huge BigInt) is reported as an exception rather than
 * breaking the run; a lone surrogate in its text becomes U+FFFD. Whether it is
 * an observation the loop can use is the loop's call.
 */
function observationText(obs, what) {
  let value = obs;
  if (typeof obs === 'string') {
    try {
      value = JSON.parse(obs);
    } catch {
      return invalidObservation(`the operation returned ${what} that is not JSON: ${obs.slice(0, 200)}`);
    }
  }
  try {
    return exactStringify(value === undefined ? null : value, 'observation', { scrub: true });
  } catch (e) {
    return invalidObservation(`the operation returned ${what} JSON cannot carry: ${safeMessage(e)}`);
  }
}

function invalidObservation(message) {
  return exactStringify({ source: 'exception', type: 'agent_recovery.InvalidObservation', message }, 'observation', { scrub: true });
}

function safeMessage(e) {
  try {
    return String(e?.message ?? e);
  } catch {
    return 'an error whose message cannot be read';
  }
}

/** The `result` member of an operation's thrown error's `attempt` input: its observation. */
export function failedText(obs) {
  return `{"failed":${observationText(obs, 'an error')}}`;
}

/** True for a fetch Response (duck-typed, as failureOf does). */
function isFetchResponse(v) {
  return (
    v !== null &&
    typeof v === 'object' &&
    typeof v.status === 'number' &&
    typeof v.ok === 'boolean' &&
    typeof v.text === 'function' &&
    typeof v.clone === 'function' &&
    v.headers
  );
}

/**
 * What an operation returned, as the `result` member of the `attempt` input:
 * a plain value is `{"ok": value}`; Failed / RawOutcome are explicit; a fetch
 * Response, an MCP `isError` result, an A2A task or a JSON-RPC error are raw
 * outcomes the component judges (`{"response": ..}`). The text at once for
 * a value that is not an object, else a promise of it.
 */
export function resultOf(value) {
  // A plain value (not an object): its text at once, no promise.
  if (value === undefined || value === null || (typeof value !== 'object' && typeof value !== 'function')) return `{"ok":${valueText(value)}}`;
  return resultText(value).catch((e) => {
    // A value that throws while being read (a hostile getter or proxy).
    if (passesThrough(e)) throw e;
    return `{"failed":${invalidObservation(`the operation returned a value that cannot be read: ${safeMessage(e)}`)}}`;
  });
}

async function resultText(value) {
  if (value instanceof Failed) return `{"failed":${observationText(value.observation, 'a Failed observation')}}`;
  if (value instanceof RawOutcome) return `{"response":${observationText(value.outcome, 'a RawOutcome')}}`;
  if (isFetchResponse(value)) {
    // A non-2xx, or a JSON body (where a refusal would be), is read from a clone
    // for the component to judge; the caller keeps the untouched Response.
    const type = String(value.headers.get?.('content-type') ?? '');
    const readBody = !value.ok || type.includes('json');
    const obs = readBody ? await fromResponse(value.clone()) : { source: 'http', status: value.status };
    return `{"response":${observationText(obs, 'a response')}}`;
  }
  if (value !== null && typeof value === 'object') {
    const obs = await failureOf(value);
    if (obs !== undefined) return `{"response":${observationText(obs, 'a result')}}`;
  }
  return `{"ok":${valueText(value)}}`;
}
