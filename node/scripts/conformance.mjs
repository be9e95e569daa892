#!/usr/bin/env node
// Conformance driver: JSON Lines in, one line out per input line, so the Node
// binding can be compared byte for byte with the Rust and Python hosts.
//
//   node scripts/conformance.mjs [--component PATH] < cases.jsonl > out.txt
//
// Input, one JSON object per line (JSON-in-JSON fields are JSON *text*):
//   {"op":"classify","observation":"<json>"}
//   {"op":"decide","observation":"<json>","context":"<json>"}
//   {"op":"key","run_id":"..","step_id":"..","tool":"..","args":"<json>"}
//   {"op":"backoff","call":"tool"|"llm"|"agent","attempt":1,"seed":42,"config":"<json>"?}
//   {"op":"render","envelope":"<json>","format":"jsonrpc-error"|..,"options":"<json>"?}
// Output: the component's text unchanged (backoff: the delay in decimal ms), or
//   ERROR <kind> <message>
// with <kind> a policy-error kind (invalid_json, invalid_observation, ...), as the
// Rust and Python drivers print it: a line that is not a JSON object gives
// `ERROR invalid_json ...`, a missing member or unknown op `ERROR invalid_argument ...`,
// a `config` that is not JSON `ERROR invalid_config ...`, and a failure of the
// component itself `ERROR runtime_<kind> ...` (runtime_trap, runtime_load).
// Newlines in a message become spaces. Blank lines are skipped.
// Seeds may be JSON numbers beyond 2^53 (read exactly) or decimal strings.

import { createInterface } from 'node:readline';
import { Policy, PolicyError, PolicyLoadError, PolicyRuntimeError } from '../src/index.js';
import { parseLossless } from '../src/json.js';

function usage() {
  process.stderr.write('usage: node scripts/conformance.mjs [--component PATH] < cases.jsonl\n');
  process.exit(2);
}

class InputError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function field(op, name, { optional = false } = {}) {
  const v = op[name];
  if (v === undefined && optional) return undefined;
  if (typeof v !== 'string') {
    throw new InputError('invalid_argument', `"${name}" must be JSON text in a string, got ${v === undefined ? 'nothing' : typeof v}; e.g. "${name}":"{}"`);
  }
  return v;
}

function answer(policy, op) {
  switch (op.op) {
    case 'classify':
      return policy.classifyJson(field(op, 'observation'));
    case 'decide':
      return policy.decideJson(field(op, 'observation'), field(op, 'context', { optional: true }) ?? '{}');
    case 'key':
      return policy.key({ runId: op.run_id, stepId: op.step_id, tool: op.tool, argsJson: field(op, 'args') });
    case 'backoff': {
      const configText = typeof op.config === 'string' ? op.config : op.config === undefined ? undefined : JSON.stringify(op.config);
      let config;
      try {
        config = configText === undefined || configText.trim() === '' ? undefined : parseLossless(configText);
      } catch (e) {
        throw new InputError('invalid_config', `"config" is not JSON (${e.message}); send the config object`);
      }
      const attempt = typeof op.attempt === 'bigint' ? Number(op.attempt) : op.attempt;
      return String(
        policy.backoff({
          call: op.call,
          attempt,
          seed: op.seed ?? undefined,
          config,
        }),
      );
    }
    case 'render':
      return policy.renderJson(field(op, 'envelope'), op.format, field(op, 'options', { optional: true }) ?? '');
    default:
      throw new InputError('invalid_argument', `unknown op ${JSON.stringify(op.op)}; use classify, decide, key, backoff or render`);
  }
}

function oneLine(s) {
  return String(s).replace(/\r?\n/g, ' ');
}

async function run() {
  const args = process.argv.slice(2);
  let component;
  if (args.length === 2 && args[0] === '--component') component = args[1];
  else if (args.length !== 0) usage();
  const policy = await Policy.load(component);

  const out = [];
  const flush = () => {
    if (out.length > 0) process.stdout.write(`${out.join('\n')}\n`);
    out.length = 0;
  };
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  let number = 0;
  for await (const line of rl) {
    number += 1;
    if (line.trim() === '') continue;
    let result;
    try {
      let op;
      try {
        op = parseLossless(line);
      } catch (e) {
        throw new InputError('invalid_json', `input line ${number} is not JSON (${e.message}); send one object per line`);
      }
      if (op === null || typeof op !== 'object' || Array.isArray(op)) {
        throw new InputError('invalid_json', `input line ${number} is not a JSON object; send one object per line`);
      }
      result = answer(policy, op);
    } catch (e) {
      if (e instanceof PolicyError || e instanceof InputError) result = `ERROR ${e.kind} ${oneLine(e.message)}`;
      else if (e instanceof PolicyLoadError) result = `ERROR runtime_load ${oneLine(e.message)}`;
      else if (e instanceof PolicyRuntimeError) result = `ERROR runtime_trap ${oneLine(e.message)}`;
      else throw e;
    }
    out.push(result);
    if (out.length >= 256) flush();
  }
  flush();
}

run().catch((e) => {
  process.stderr.write(`conformance: error: ${e.message}\n`);
  process.exit(2);
});
