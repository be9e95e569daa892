// The backoff plot: for one call kind and config, per retry (after failed
// attempt n), the full-jitter range [0, ceiling(n)], delays the policy drew
// for sample seeds, the delays for the context's seed added up from the run's
// elapsed_ms, and the run's retry budget.
//
// ceiling(n) = min(cap_ms, base_ms * 2^(n-1)) is computed here from the
// documented formula (guest/src/backoff.rs, docs/envelope-and-decision.md "Defaults"); the delays come
// from the component's `backoff.delay`. A sample outside its range is drawn red.
// The y axis is logarithmic from 10 ms (a delay under 10 ms sits on the floor).

const SVG = 'http://www.w3.org/2000/svg';

/** The defaults of the contract (WIT `policy-config`), in ms. */
export const DEFAULTS = Object.freeze({
  tool: { base_ms: 250, cap_ms: 30000, max_attempts: 5 },
  llm: { base_ms: 1000, cap_ms: 30000, max_attempts: 3 },
  agent: { base_ms: 1000, cap_ms: 30000, max_attempts: 3 },
  retry_budget_ms: 60000,
});

/** The documented ceiling, in BigInt ms (saturating like the guest). */
export function ceiling(b, n) {
  const exp = BigInt(Math.min(Math.max(n - 1, 0), 63));
  const grown = BigInt(b.base_ms) << exp;
  const max = (1n << 64n) - 1n;
  const sat = grown > max ? max : grown;
  return sat < BigInt(b.cap_ms) ? sat : BigInt(b.cap_ms);
}

/** The effective parameters: the context's `config` over the defaults. */
export function effective(config) {
  const out = { retry_budget_ms: config?.retry_budget_ms ?? DEFAULTS.retry_budget_ms };
  for (const call of ['tool', 'llm', 'agent']) out[call] = { ...DEFAULTS[call], ...(config?.[call] ?? {}) };
  return out;
}

/** The WIT `policy-config` record for `backoff.delay`, or undefined without a config. */
export function witConfig(config) {
  if (!config) return undefined;
  const eff = effective(config);
  const rec = (b) => ({ baseMs: BigInt(b.base_ms), capMs: BigInt(b.cap_ms), maxAttempts: b.max_attempts });
  return {
    tool: config.tool ? rec(eff.tool) : undefined,
    llm: config.llm ? rec(eff.llm) : undefined,
    agent: config.agent ? rec(eff.agent) : undefined,
    retryBudgetMs: config.retry_budget_ms === undefined ? undefined : BigInt(config.retry_budget_ms),
  };
}

function el(name, attrs, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/**
 * Draws into `svg`. `rows`: [{n, ceiling: number, samples: number[], mine: number}],
 * `budget`, `elapsed` (ms), `decision`: {attempt, delay} or null.
 */
export function draw(svg, { rows, budget, elapsed, decision, title }) {
  svg.replaceChildren();
  const W = 640;
  const H = 300;
  const m = { l: 62, r: 16, t: 28, b: 40 };
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  let cum = elapsed;
  const path = rows.map((r) => (cum += r.mine));
  // Log scale from 10 ms, so a 250 ms delay and a 60 s budget both show.
  const LOW = 10;
  const high = Math.max(budget, ...rows.map((r) => r.ceiling), ...path, decision?.delay ?? 0, 100) * 1.3;
  const x = (i) => m.l + ((i + 0.5) * (W - m.l - m.r)) / Math.max(rows.length, 1);
  const y = (v) => H - m.b - (Math.log10(Math.max(v, LOW) / LOW) / Math.log10(high / LOW)) * (H - m.t - m.b);
  const band = Math.min(((W - m.l - m.r) / Math.max(rows.length, 1)) * 0.5, 90);

  svg.append(el('text', { x: m.l, y: 16, class: 'plot-title' }, title));
  for (const [v, label] of [[10, '≤10 ms'], [100, '100 ms'], [1000, '1 s'], [10000, '10 s'], [60000, '1 min'], [600000, '10 min'], [3600000, '1 h']]) {
    if (v > high) break;
    svg.append(el('line', { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v), class: 'grid' }));
    svg.append(el('text', { x: m.l - 6, y: y(v) + 4, class: 'tick', 'text-anchor': 'end' }, label));
  }
  rows.forEach((r, i) => {
    svg.append(el('rect', { x: x(i) - band / 2, width: band, y: y(r.ceiling), height: Math.max(y(0) - y(r.ceiling), 1), class: 'range' }));
    svg.append(el('text', { x: x(i), y: H - m.b + 16, class: 'tick', 'text-anchor': 'middle' }, `after ${r.n}`));
    r.samples.forEach((s, k) => {
      const off = ((k % 9) - 4) * (band / 10);
      const bad = s < 0 || s > r.ceiling;
      svg.append(el('circle', { cx: x(i) + off, cy: y(s), r: 2.4, class: bad ? 'sample bad' : 'sample' }));
    });
  });
  svg.append(el('text', { x: (W + m.l) / 2, y: H - 6, class: 'tick', 'text-anchor': 'middle' }, 'retry after failed attempt n'));
  // The run's budget, and this seed's delays added up.
  svg.append(el('line', { x1: m.l, x2: W - m.r, y1: y(budget), y2: y(budget), class: 'budget' }));
  svg.append(el('text', { x: W - m.r - 4, y: y(budget) - 5, class: 'budget-label', 'text-anchor': 'end' }, `retry budget ${budget} ms`));
  if (rows.length > 0) {
    const pts = rows.map((_, i) => `${x(i)},${y(path[i])}`).join(' ');
    svg.append(el('polyline', { points: pts, class: 'spent' }));
    rows.forEach((r, i) => svg.append(el('circle', { cx: x(i), cy: y(path[i]), r: 3.5, class: 'spent-dot' })));
    rows.forEach((r, i) => svg.append(el('circle', { cx: x(i), cy: y(r.mine), r: 4, class: 'mine' })));
  }
  if (decision && decision.delay !== null) {
    const i = rows.findIndex((r) => r.n === decision.attempt);
    if (i >= 0) {
      svg.append(el('path', { d: `M${x(i) + band / 2 + 4},${y(decision.delay)} l8,-5 v10 z`, class: 'decision-mark' }));
      svg.append(el('text', { x: x(i) + band / 2 + 14, y: y(decision.delay) + 4, class: 'decision-label' }, `this decision: ${decision.delay} ms`));
    }
  }
}
