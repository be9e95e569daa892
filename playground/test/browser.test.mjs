// The playground in a real headless browser (Debian's Chromium through
// playwright-core), against the CLI.
//
// For every observation in examples/observations/, the page is opened at
// `#obs=<base64url of the file>&ctx=<base64url of {"attempt":1,"seed":42}>`,
// and `#decision` must be byte for byte what
// `target/release/agent-recovery decide FILE --attempt 1 --seed 42` prints.
// Loading other components through the file input must give the CLI's answer
// for a good one (payments-policy) and refuse bad ones at the hosts' stage,
// including one that loops forever (stopped by the page's deadline).
// The page must make no request beyond the static server, and log no error.
//
//   CHROMIUM=/usr/bin/chromium            the browser (default)
//   PLAYGROUND_SCREENSHOT=FILE            where the screenshot goes
//                                         (default target/playground.png;
//                                         docs/playground.png to refresh the one docs/getting-started.md shows)

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFile, readdir, mkdir } from 'node:fs/promises';
import { createServer } from 'node:http';
import { dirname, extname, join, normalize } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const HERE = fileURLToPath(new URL('..', import.meta.url));
const REPO = join(HERE, '..');
const DIST = join(HERE, 'dist');
const CLI = join(REPO, 'target', 'release', 'agent-recovery');
const EXAMPLES = join(REPO, 'examples', 'observations');
const CTX = '{"attempt":1,"seed":42}';
const SCREENSHOT = process.env.PLAYGROUND_SCREENSHOT ?? join(REPO, 'target', 'playground.png');

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.wasm': 'application/wasm' };

const b64url = (text) => Buffer.from(text, 'utf8').toString('base64url');

let server;
let origin;
let browser;
const offsite = [];

/** A static file server for dist/ on 127.0.0.1 (what `python3 -m http.server` does). */
function serve() {
  return new Promise((resolve) => {
    server = createServer(async (req, res) => {
      const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
      const file = join(DIST, path.endsWith('/') ? `${path}index.html` : path);
      try {
        const body = await readFile(file);
        res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
        res.end(body);
      } catch {
        res.writeHead(404).end('not found');
      }
    });
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`));
  });
}

function cli(...args) {
  return execFileSync(CLI, args, { encoding: 'utf8', env: { ...process.env, AGENT_RECOVERY_CACHE_DIR: join(REPO, 'target', 'playground-cli-cache') } }).replace(/\n$/, '');
}

async function artifacts() {
  return JSON.parse(await readFile(join(REPO, 'target', 'wasm-policies', 'artifacts.json'), 'utf8'));
}

/** A fresh page, watched for errors and for any request off the static server. */
async function open(hash) {
  const page = await browser.newPage({ viewport: { width: 1360, height: 1000 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('request', (r) => {
    const url = r.url();
    if (!url.startsWith(`${origin}/`) && !url.startsWith('blob:') && !url.startsWith('data:')) offsite.push(url);
  });
  await page.goto(`${origin}/index.html${hash}`);
  await page.waitForSelector('body[data-state="ready"], body[data-state="error"]', { timeout: 60000 });
  return { page, errors };
}

before(async () => {
  origin = await serve();
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
});

after(async () => {
  await browser?.close();
  server?.close();
  assert.deepEqual(offsite, [], 'the page made no request beyond the static files');
});

test("the page's decision is the CLI's, byte for byte, for every example observation", async () => {
  const files = (await readdir(EXAMPLES)).filter((f) => f.endsWith('.json')).sort();
  assert.ok(files.length >= 10, `examples found: ${files.length}`);
  for (const name of files) {
    const file = join(EXAMPLES, name);
    const text = await readFile(file, 'utf8');
    const { page, errors } = await open(`#obs=${b64url(text)}&ctx=${b64url(CTX)}`);
    assert.equal(await page.getAttribute('body', 'data-state'), 'ready', name);
    const got = await page.textContent('#decision');
    assert.equal(got, cli('decide', file, '--attempt', '1', '--seed', '42'), name);
    // The envelope shown is the one inside the decision; the link round-trips.
    const envelope = JSON.parse(await page.textContent('#envelope'));
    assert.equal(envelope.code, JSON.parse(got).envelope.code, name);
    const hash = new URL(page.url()).hash;
    assert.match(hash, new RegExp(`obs=${b64url(text)}&ctx=${b64url(CTX)}&as=`), name);
    assert.deepEqual(errors, [], name);
    await page.close();
  }
});

test("the page's extra examples (not in examples/observations/) decide as the CLI does", async () => {
  const { default: examples } = await import(join(DIST, 'examples.js'));
  const extras = examples.filter((e) => e.file === null);
  const sources = new Set(examples.map((e) => e.source));
  for (const s of ['http', 'mcp', 'a2a', 'network', 'timeout']) assert.ok(sources.has(s), `an example for ${s}`);
  assert.ok(extras.length > 0);
  for (const ex of extras) {
    const { page, errors } = await open(`#obs=${b64url(ex.text)}&ctx=${b64url(CTX)}`);
    const want = execFileSync(CLI, ['decide', '-', '--attempt', '1', '--seed', '42'], {
      input: ex.text,
      encoding: 'utf8',
      env: { ...process.env, AGENT_RECOVERY_CACHE_DIR: join(REPO, 'target', 'playground-cli-cache') },
    });
    assert.equal(await page.textContent('#decision'), want.replace(/\n$/, ''), ex.name);
    assert.equal(await page.inputValue('#example'), ex.name, 'the example is selected');
    assert.deepEqual(errors, [], ex.name);
    await page.close();
  }
});

test('every render format is the CLI render output', async () => {
  const file = join(EXAMPLES, 'openai-429-rate-limit.json');
  const text = await readFile(file, 'utf8');
  const options = '{"id":1,"task_id":"task-1","context_id":"ctx-1","current_agent":"planner","downstream_agent":"worker"}';
  for (const as of ['jsonrpc-error', 'mcp-tool-result', 'problem-json', 'downstream-wrap']) {
    const { page } = await open(`#obs=${b64url(text)}&ctx=${b64url(CTX)}&as=${as}`);
    const shown = JSON.parse(await page.textContent('#rendered'));
    assert.deepEqual(shown, JSON.parse(cli('render', '--as', as, file, '--options', options)), as);
    await page.close();
  }
});

test('the backoff plot draws every sampled delay inside its documented range', async () => {
  const obs = '{"source":"http","status":503,"call":"tool"}';
  const ctx = '{"attempt":2,"seed":7,"config":{"tool":{"base_ms":100,"cap_ms":1000,"max_attempts":6},"retry_budget_ms":3000}}';
  const { page, errors } = await open(`#obs=${b64url(obs)}&ctx=${b64url(ctx)}`);
  // 5 retries (after attempts 1..5), 40 seeds each; ceilings 100, 200, 400, 800, 1000 ms.
  assert.equal(await page.locator('#plot rect.range').count(), 5);
  assert.equal(await page.locator('#plot circle.sample').count(), 5 * 40);
  assert.equal(await page.locator('#plot circle.sample.bad').count(), 0);
  assert.match(await page.textContent('#plot'), /retry budget 3000 ms/);
  assert.match(await page.textContent('#plot'), /tool: base 100 ms, cap 1000 ms, 6 attempts; seed 7/);
  // The context's seed: the page's delays are `agent-recovery backoff`'s.
  const config = join(REPO, 'target', 'playground-config.json');
  await mkdir(dirname(config), { recursive: true });
  const { writeFile } = await import('node:fs/promises');
  await writeFile(config, JSON.stringify(JSON.parse(ctx).config));
  const mine = await page.locator('#plot circle.mine').evaluateAll((cs) => cs.map((c) => Number(c.getAttribute('cy'))));
  assert.equal(mine.length, 5);
  const delays = [1, 2, 3, 4, 5].map((n) => JSON.parse(cli('--config', config, 'backoff', '--call', 'tool', '--attempt', String(n), '--seed', '7')).delay_ms);
  // Same order of y positions as the CLI's delays (SVG y grows downwards).
  const order = (xs) => xs.map((_, i) => i).sort((a, b) => xs[a] - xs[b] || a - b);
  assert.deepEqual(order(mine.map((y) => -y)), order(delays));
  assert.deepEqual(errors, []);
  await page.close();
});

test('another policy .wasm is checked like the hosts check it, then used', async () => {
  const art = await artifacts();
  const file = join(EXAMPLES, 'tool-503-retry-after-date.json');
  const text = await readFile(file, 'utf8');
  const ctx = '{"attempt":2,"seed":42}';
  const { page, errors } = await open(`#obs=${b64url(text)}&ctx=${b64url(ctx)}`);
  const before = await page.textContent('#decision');

  const load = async (path, pin = '') => {
    await page.fill('#wasm-pin', pin);
    await page.setInputFiles('#wasm-file', path);
    await page.waitForFunction(() => /still active|active:/.test(document.getElementById('load-report').textContent), null, { timeout: 120000 });
    await page.waitForSelector('body[data-state="ready"]');
    return page.textContent('#load-report');
  };

  // Not wasm at all: refused at load before compiling, the reference keeps answering.
  const junk = join(REPO, 'target', 'playground-junk.wasm');
  const { writeFile } = await import('node:fs/promises');
  await writeFile(junk, 'hello');
  let report = await load(junk);
  assert.match(report, /refused at load: .*not a WebAssembly binary/);
  assert.match(report, /still active: agent-recovery-reference/);
  assert.equal(await page.textContent('#decision'), before);

  // A pinned digest that does not match: refused at digest.
  report = await load(art['payments-policy'], '0'.repeat(64));
  assert.match(report, /refused at digest: .* not the pinned 0000/);

  // Imports the filesystem and sockets: refused at load, naming them.
  report = await load(art['hostile-sneaky']);
  assert.match(report, /refused at load: .*wasi:filesystem/);

  // Another world: refused at load.
  report = await load(art['hostile-wrong-world']);
  assert.match(report, /refused at load/);

  // Garbage output: refused at verify by its own smoke set.
  report = await load(art['hostile-garbage']);
  assert.match(report, /refused at verify/);

  // Loops forever: the check runs in a worker, which the page stops at the
  // verify deadline (a host stops it by fuel); the page keeps answering.
  report = await load(art['hostile-spin']);
  assert.match(report, /refused at verify: .*did not finish its smoke set within 5 s/);
  assert.equal(await page.textContent('#decision'), before);

  // payments-policy: accepted, identity shown, and its decision is the CLI's.
  const sha = cli('check', art['payments-policy']);
  report = await load(art['payments-policy'], JSON.parse(sha).sha256);
  assert.match(report, /active: payments-strict 1\.0\.0/);
  assert.match(report, new RegExp(`✓ digest: matches the pin ${JSON.parse(sha).sha256.slice(0, 16)}`));
  const got = await page.textContent('#decision');
  assert.equal(got, cli('--policy', art['payments-policy'], 'decide', file, '--attempt', '2', '--seed', '42'));
  assert.match(await page.textContent('#identity'), new RegExp(`payments-strict 1\\.0\\.0 .* sha256 ${JSON.parse(sha).sha256.slice(0, 16)}`));
  assert.deepEqual(errors, []);
  await page.close();
});

test('a screenshot of the page', async () => {
  const text = await readFile(join(EXAMPLES, 'openai-429-rate-limit.json'), 'utf8');
  const { page } = await open(`#obs=${b64url(text)}&ctx=${b64url('{"attempt":1,"seed":42}')}`);
  await mkdir(dirname(SCREENSHOT), { recursive: true });
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  const png = await readFile(SCREENSHOT);
  assert.equal(png.subarray(1, 4).toString(), 'PNG');
  await page.close();
});
