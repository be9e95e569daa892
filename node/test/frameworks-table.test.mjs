// node/bench/frameworks-table.mjs runs the scripts of the Python rows
// (tests/frameworks/scenarios.json), so its rows compare with theirs. Under
// `rate_limit` (one 429 with Retry-After: 1, then success) the task (the model
// calls charge(5), then answers) takes three model requests (the 429, the
// tool call, the answer), one charge, and completes charged, with either
// framework, alone or with its adapter: what the Python rows of
// docs/integrations/frameworks.md show for the same script.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { table } from '../bench/frameworks-table.mjs';

test('the Node rows of rate_limit count the task of the Python rows', async () => {
  const rows = [];
  await table((row) => rows.push(row), { scenarios: ['rate_limit'] });
  const counts = { model_requests: 3, tool_requests: 1, side_effects: 1, outcome: 'completed, charged' };
  const want = ['ai-sdk', 'openai-agents-js'].flatMap((framework) =>
    ['without', 'with'].map((mode) => ({ framework, scenario: 'rate_limit', mode, ...counts })),
  );
  assert.deepEqual(rows, want);
});
