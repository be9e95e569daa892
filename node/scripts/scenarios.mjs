#!/usr/bin/env node
// The batch driver of the cross-runtime conformance check for the runtime:
// reads stdin, one JSON array of scenarios per line; runs each line's
// scenarios in order against ONE fresh MemoryStore; prints one output line per
// scenario: the text of Rust's ScenarioOutput::to_json, or {"error":"<kind>"}
// (kind: invalid | runtime) when the scenario could not run.
//
//   node node/scripts/scenarios.mjs < lines.jsonl

import { createInterface } from 'node:readline';
import { runBatch } from '../src/scenario.js';

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const out of runBatch(lines)) process.stdout.write(`${out}\n`);
