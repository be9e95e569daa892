// The playground page: editors in, the policy's answers out.
//
// Every answer on the page is the component's own output: `#decision` holds
// decide-json's text byte for byte, `#envelope` classify-json's (indented for
// reading), `#rendered` render-json's. `body[data-state]` is `ready` once the
// current input has been computed (`error` when the policy refused it).

import examples from './examples.js';
import { draw, ceiling, effective, witConfig } from './plot.js';
import { Refused, errorText, loadCandidate, loadReference } from './policy.js';
import { readFragment, writeFragment } from './state.js';

const FORMATS = ['jsonrpc-error', 'mcp-tool-result', 'a2a-task-status', 'problem-json', 'model-tool-result', 'coordinator-text', 'downstream-wrap'];
const DEFAULT_CTX = '{"attempt":1,"seed":42}';
const SAMPLE_SEEDS = 40;

const $ = (id) => document.getElementById(id);
let reference;
let active;
let format = FORMATS[0];

function pretty(json) {
  try {
    return JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    return json;
  }
}

function identityText(p) {
  const id = p.identity;
  return `${id.name} ${id.version} · contract ${id.contract} · sha256 ${id.sha256.slice(0, 16)}… · ${id.size} bytes${p === reference ? ' · reference' : ''}`;
}

// ----- examples -------------------------------------------------------------

function fillExamples() {
  const select = $('example');
  const groups = new Map();
  for (const ex of examples) {
    if (!groups.has(ex.source)) groups.set(ex.source, []);
    groups.get(ex.source).push(ex);
  }
  select.append(new Option('(your own)', ''));
  for (const [source, list] of [...groups].sort()) {
    const group = document.createElement('optgroup');
    group.label = source;
    for (const ex of list) group.append(new Option(ex.name.replace(/\.json$/, ''), ex.name));
    select.append(group);
  }
  select.addEventListener('change', () => {
    const ex = examples.find((e) => e.name === select.value);
    if (!ex) return;
    $('obs').value = ex.text;
    update();
  });
}

function markExample() {
  const text = $('obs').value;
  const ex = examples.find((e) => e.text === text || e.text.trim() === text.trim());
  $('example').value = ex ? ex.name : '';
}

// ----- context fields <-> context JSON ---------------------------------------

function parseCtx() {
  try {
    const v = JSON.parse($('ctx').value);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

function fieldsFromCtx() {
  const ctx = parseCtx() ?? {};
  $('ctx-call').value = typeof ctx.call === 'string' ? ctx.call : '';
  $('ctx-attempt').value = ctx.attempt ?? '';
  $('ctx-elapsed').value = ctx.elapsed_ms ?? '';
  $('ctx-seed').value = ctx.seed ?? '';
}

function ctxFromFields() {
  const ctx = parseCtx() ?? {};
  const set = (key, raw, asNumber) => {
    if (raw === '') delete ctx[key];
    else ctx[key] = asNumber && /^\d+$/.test(raw) && Number.isSafeInteger(Number(raw)) ? Number(raw) : raw;
  };
  set('call', $('ctx-call').value, false);
  set('attempt', $('ctx-attempt').value, true);
  set('elapsed_ms', $('ctx-elapsed').value, true);
  set('seed', $('ctx-seed').value, true);
  $('ctx').value = JSON.stringify(ctx);
  update();
}

// ----- computing ---------------------------------------------------------------

function showProblem(text) {
  $('problem').hidden = !text;
  $('problem').textContent = text ?? '';
}

function summary(d) {
  const env = d.envelope;
  const up = env.upstream ?? {};
  const facts = [up.source, up.provider, up.status != null && `status ${up.status}`, up.code && `code ${up.code}`, up.type && `type ${up.type}`].filter(Boolean);
  const div = $('summary');
  div.replaceChildren();
  const head = document.createElement('div');
  head.innerHTML = '<span class="code"></span><span class="tag"></span> <span class="meta"></span>';
  head.querySelector('.code').textContent = env.code;
  const tag = head.querySelector('.tag');
  tag.textContent = env.class;
  tag.className = `tag c-${env.class}`;
  head.querySelector('.meta').textContent = ` ${env.category} · ${env.severity}`;
  div.append(head);
  const row = (label, text, cls) => {
    const r = document.createElement('div');
    r.className = 'row';
    r.innerHTML = '<span class="label"></span><span class="value"></span>';
    r.querySelector('.label').textContent = label;
    r.querySelector('.value').textContent = text;
    if (cls) r.querySelector('.value').className = `value ${cls}`;
    div.append(r);
  };
  const delay = d.delay_ms === null ? '' : ` in ${d.delay_ms} ms`;
  row('action', `${d.action}${delay}  (attempt ${d.attempt} of ${d.max_attempts}, ${d.budget_remaining_ms} ms of retry budget left)`, 'action');
  row('reason', d.reason_code ? `${d.reason} (${d.reason_code})` : d.reason);
  row('hint', env.hint);
  if (env.field) row('field', env.field);
  if (facts.length) row('upstream', facts.join(' · '));
}

function plot(obsText, ctx, decision) {
  let obs = {};
  try {
    obs = JSON.parse(obsText) ?? {};
  } catch {
    // shown as a problem already
  }
  const surface = decision?.envelope?.code?.split('.')[0];
  const call = [ctx?.call, obs.context?.call, obs.call, surface].find((c) => ['tool', 'llm', 'agent'].includes(c)) ?? 'tool';
  const config = ctx?.config ?? obs.context?.config;
  const eff = effective(config);
  const b = eff[call];
  const seed = ctx?.seed ?? obs.context?.seed;
  const seedBig = seed === undefined ? 0n : BigInt(seed);
  const rows = [];
  const wit = witConfig(config);
  try {
    for (let n = 1; n < Math.max(b.max_attempts, 2); n++) {
      const samples = [];
      for (let s = 0; s < SAMPLE_SEEDS; s++) samples.push(Number(active.delay(call, n, BigInt(s), wit)));
      rows.push({ n, ceiling: Number(ceiling(b, n)), samples, mine: Number(active.delay(call, n, seedBig, wit)) });
    }
  } catch (e) {
    showProblem(`backoff: ${errorText(e)}`);
  }
  draw($('plot'), {
    rows,
    budget: Number(eff.retry_budget_ms),
    elapsed: Number(ctx?.elapsed_ms ?? 0),
    decision: decision ? { attempt: decision.attempt, delay: decision.delay_ms } : null,
    title: `${call}: base ${b.base_ms} ms, cap ${b.cap_ms} ms, ${b.max_attempts} attempts; seed ${seed ?? '0 (none given)'}`,
  });
}

function renderTabs() {
  const tabs = $('formats');
  tabs.replaceChildren();
  for (const f of FORMATS) {
    const button = document.createElement('button');
    button.type = 'button';
    button.textContent = f;
    button.setAttribute('role', 'tab');
    button.setAttribute('aria-selected', String(f === format));
    button.addEventListener('click', () => {
      format = f;
      update();
    });
    tabs.append(button);
  }
}

function update() {
  const obs = $('obs').value;
  const ctxText = $('ctx').value.trim() === '' ? '{}' : $('ctx').value;
  history.replaceState(null, '', writeFragment({ obs, ctx: ctxText, as: format }));
  markExample();
  renderTabs();
  const problems = [];
  let envelope = null;
  let decision = null;
  try {
    envelope = active.classifyJson(obs);
    $('envelope').textContent = pretty(envelope);
  } catch (e) {
    problems.push(`classify: ${errorText(e)}`);
    $('envelope').textContent = '';
  }
  try {
    const text = active.decideJson(obs, ctxText);
    $('decision').textContent = text;
    decision = JSON.parse(text);
    summary(decision);
  } catch (e) {
    problems.push(`decide: ${errorText(e)}`);
    $('decision').textContent = '';
    $('summary').replaceChildren();
  }
  if (envelope !== null) {
    try {
      $('rendered').textContent = pretty(active.renderJson(envelope, format, '{"id":1,"task_id":"task-1","context_id":"ctx-1","current_agent":"planner","downstream_agent":"worker"}'));
    } catch (e) {
      problems.push(`render ${format}: ${errorText(e)}`);
      $('rendered').textContent = '';
    }
  } else {
    $('rendered').textContent = '';
  }
  showProblem(problems.join('\n'));
  plot(obs, parseCtx(), decision);
  document.body.dataset.state = decision ? 'ready' : 'error';
}

// ----- loading another policy ------------------------------------------------

async function loadFile(file) {
  const report = $('load-report');
  report.hidden = false;
  report.className = 'load-report';
  const lines = [`${file.name}:`];
  report.textContent = lines.join('\n');
  const note = (stage, text) => {
    lines.push(`  ✓ ${stage}: ${text}`);
    report.textContent = lines.join('\n');
  };
  document.body.dataset.state = 'loading';
  try {
    const bytes = new Uint8Array(await file.arrayBuffer());
    const candidate = await loadCandidate(bytes, file.name, $('wasm-pin').value.trim(), note);
    active = candidate;
    lines.push(`  active: ${identityText(candidate)}`);
    $('use-reference').hidden = false;
  } catch (e) {
    const stage = e instanceof Refused ? e.stage : 'load';
    lines.push(`  ✗ refused at ${stage}: ${errorText(e)}`, `  still active: ${identityText(active)}`);
    report.className = 'load-report refused';
  }
  report.textContent = lines.join('\n');
  report.dataset.result = active === reference ? 'reference' : 'candidate';
  $('identity').textContent = identityText(active);
  update();
}

// ----- start -----------------------------------------------------------------

async function start() {
  fillExamples();
  const frag = readFragment(location.hash);
  $('obs').value = frag.obs ?? examples[0]?.text ?? '{}';
  $('ctx').value = frag.ctx ?? DEFAULT_CTX;
  if (frag.as && FORMATS.includes(frag.as)) format = frag.as;
  fieldsFromCtx();
  try {
    reference = await loadReference();
  } catch (e) {
    showProblem(`the reference policy did not load: ${errorText(e)}`);
    document.body.dataset.state = 'error';
    return;
  }
  active = reference;
  $('identity').textContent = identityText(active);
  for (const id of ['ctx-call', 'ctx-attempt', 'ctx-elapsed', 'ctx-seed']) $(id).addEventListener('input', ctxFromFields);
  $('obs').addEventListener('input', update);
  $('ctx').addEventListener('input', () => {
    fieldsFromCtx();
    update();
  });
  $('wasm-file').addEventListener('change', (ev) => {
    const file = ev.target.files?.[0];
    if (file) loadFile(file);
  });
  $('use-reference').addEventListener('click', () => {
    active = reference;
    $('use-reference').hidden = true;
    $('load-report').hidden = true;
    $('identity').textContent = identityText(active);
    update();
  });
  window.addEventListener('hashchange', () => {
    const f = readFragment(location.hash);
    if (f.obs !== undefined) $('obs').value = f.obs;
    if (f.ctx !== undefined) $('ctx').value = f.ctx;
    fieldsFromCtx();
    update();
  });
  if (frag.problems.length) showProblem(frag.problems.join('\n'));
  update();
  if (frag.problems.length) showProblem(frag.problems.join('\n'));
}

start();
