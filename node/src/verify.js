// Validation of a candidate policy before it is activated: its own smoke set
// (meta.smoke-tests), plus any cases the caller adds, each run through
// decide-json and compared on `expect.action` and `expect.code`.

import { PolicyError, PolicyLoadError } from './errors.js';
import { RAW, parseLossless, stringify } from './json.js';

/**
 * Run the smoke set of `instance` and the caller's `extra` cases (an array, or
 * JSON text of an array, in the smoke-tests format). Returns the number of
 * cases run; throws PolicyLoadError('smoke_test') naming the first failure.
 */
export function verify(instance, extra) {
  const who = `${instance.identity.name} ${instance.identity.version}`;
  let own;
  try {
    own = parseCases(instance.call('smokeTests', (api) => api.smokeTests()), 'its smoke-tests()');
  } catch (e) {
    throw refuse(`${who} has no usable smoke set (${e.message})`, e);
  }
  if (own.length === 0) {
    throw refuse(`${who} returns an empty smoke set; a policy must ship at least one smoke case`);
  }
  let added = [];
  if (extra !== undefined) {
    try {
      added = typeof extra === 'string' ? parseCases(extra, 'the smokeTests option') : checkCases(extra, 'the smokeTests option');
    } catch (e) {
      throw refuse(`the smokeTests option is unusable (${e.message})`, e);
    }
  }
  const cases = [...own.map((c, i) => [`smoke case ${i}`, c]), ...added.map((c, i) => [`added case ${i}`, c])];
  for (const [label, c] of cases) {
    const obs = c[RAW]?.observation ?? stringify(c.observation);
    const ctx = c[RAW]?.context ?? (c.context === undefined ? '{}' : stringify(c.context));
    let out;
    try {
      out = instance.call('decideJson', (api) => api.decideJson(obs, ctx));
    } catch (e) {
      // A wrong answer (a policy-error) is a smoke-test failure; the component
      // failing (a trap) keeps its own code, as in the Rust and Python hosts.
      const why = e instanceof PolicyError ? `policy-error ${e.kind}: ${e.message}` : e.message;
      throw refuse(`${who} failed ${label} (${obs}): ${why}`, e, e instanceof PolicyError ? undefined : e.code);
    }
    let decision;
    try {
      decision = JSON.parse(out);
    } catch (e) {
      throw refuse(`${who} failed ${label}: its decision is not JSON (${e.message})`, e, 'invalid-output');
    }
    const want = c.expect ?? {};
    const got = { action: decision.action, code: decision.envelope?.code };
    for (const field of ['action', 'code']) {
      if (want[field] !== undefined && want[field] !== got[field]) {
        throw refuse(
          `${who} failed ${label}: expected ${field} ${JSON.stringify(want[field])}, got ${JSON.stringify(got[field])} for ${obs} with context ${ctx}`,
        );
      }
    }
  }
  return cases.length;
}

function parseCases(text, what) {
  let v;
  try {
    v = parseLossless(text);
  } catch (e) {
    throw new Error(`${what} is not valid JSON: ${e.message}`, { cause: e });
  }
  return checkCases(v, what);
}

function checkCases(v, what) {
  if (!Array.isArray(v)) throw new Error(`${what} must be a JSON array of cases`);
  v.forEach((c, i) => {
    if (c === null || typeof c !== 'object' || !('observation' in c) || typeof c.expect !== 'object' || c.expect === null) {
      throw new Error(`case ${i} of ${what} needs "observation" and "expect": {"action", "code"}`);
    }
  });
  return v;
}

function refuse(message, cause, code) {
  const options = {};
  if (cause) options.cause = cause;
  if (code) options.code = code;
  return new PolicyLoadError('smoke_test', message, options);
}
