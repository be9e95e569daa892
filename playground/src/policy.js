// Loading a policy component in the browser: the shipped reference (transpiled
// at build time into policy/) or a .wasm file the user picks (transpiled here,
// with jco's js-component-bindgen component in bindgen/).
//
// A candidate passes the hosts' checks, in the hosts' order, or is refused
// naming the check: read (at most 64 MiB), digest (the optional pinned sha256,
// before anything is compiled), load (a WebAssembly component, transpiles,
// imports only the WASI interfaces a policy is granted, instantiates, exports
// every agent:recovery interface at contract 0.1.x), verify (its own smoke set:
// each case's action and code). The checks run in a worker
// (candidate-worker.js), which the page stops when the smoke set takes longer
// than VERIFY_MS: the browser has no fuel or memory limits, so a deadline is
// what stops a component that loops forever. Once accepted, the candidate
// runs on the page's thread like the reference.

import * as cli from './shim/cli.js';
import * as clocks from './shim/clocks.js';
import * as io from './shim/io.js';
import * as random from './shim/random.js';

/** The largest component the hosts read. */
export const MAX_BYTES = 64 * 1024 * 1024;

/** How long a candidate's smoke set may run before it is refused. */
export const VERIFY_MS = 5000;

/** How long transpiling a candidate may take. */
export const LOAD_MS = 120000;

/** What a policy is given: the WASI interfaces Rust's std needs on wasm32-wasip2. */
const GRANTED = Object.freeze({
  'wasi:cli/environment': { getEnvironment: () => [], getArguments: () => [], initialCwd: () => undefined },
  'wasi:cli/exit': {
    exit(status) {
      throw new Error(`the policy called exit (${status?.tag ?? 'unknown'}); a policy must never exit`);
    },
    exitWithCode(code) {
      throw new Error(`the policy called exit with code ${code}; a policy must never exit`);
    },
  },
  'wasi:cli/stdin': cli.stdin,
  'wasi:cli/stdout': cli.stdout,
  'wasi:cli/stderr': cli.stderr,
  'wasi:cli/terminal-input': cli.terminalInput,
  'wasi:cli/terminal-output': cli.terminalOutput,
  'wasi:cli/terminal-stdin': cli.terminalStdin,
  'wasi:cli/terminal-stdout': cli.terminalStdout,
  'wasi:cli/terminal-stderr': cli.terminalStderr,
  'wasi:clocks/monotonic-clock': clocks.monotonicClock,
  'wasi:clocks/wall-clock': clocks.wallClock,
  'wasi:io/error': io.error,
  'wasi:io/poll': io.poll,
  'wasi:io/streams': io.streams,
  'wasi:random/random': random.random,
  'wasi:random/insecure': random.insecure,
  'wasi:random/insecure-seed': random.insecureSeed,
});

const INTERFACES = ['classify', 'decide', 'backoff', 'registry', 'idempotency', 'render', 'meta'];

/** A check a candidate failed: `stage` is read, digest, load or verify. */
export class Refused extends Error {
  constructor(stage, message) {
    super(message);
    this.stage = stage;
  }
}

/** Hex sha256 (SubtleCrypto). */
export async function sha256(bytes) {
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** A policy error (`result::err`) or any thrown value, as one line. */
export function errorText(e) {
  if (e && typeof e === 'object' && e.payload && typeof e.payload === 'object') {
    return `policy/${e.payload.kind}: ${e.payload.message}`;
  }
  return String(e?.message ?? e).split('\n')[0];
}

function importNames(imports) {
  return [...new Set(imports.map((n) => n.replace(/@[^/]*$/, '')))].sort();
}

async function instantiate(instantiateFn, modules, imports) {
  const given = {};
  for (const name of imports) given[name] = GRANTED[name];
  const getCoreModule = (name) => {
    const m = modules.get(name);
    if (!m) throw new Error(`core module ${name} is missing`);
    return m;
  };
  return await instantiateFn(getCoreModule, given, (module, imp) => new WebAssembly.Instance(module, imp));
}

/** The exports of an instance as plain functions; refuses another contract. */
function bindExports(root) {
  const found = {};
  for (const key of Object.keys(root ?? {})) {
    const m = /^agent:recovery\/([a-z-]+)@(\d+)\.(\d+)\.(\d+)/.exec(key);
    if (m) found[m[1]] = { key, compatible: m[2] === '0' && m[3] === '1' };
  }
  const missing = INTERFACES.filter((i) => !found[i]);
  if (missing.length > 0) {
    throw new Refused('load', `the component does not export agent:recovery ${missing.join(', ')}; build it against the world agent:recovery/recovery-policy@0.1.0`);
  }
  const wrong = INTERFACES.filter((i) => !found[i].compatible);
  if (wrong.length > 0) {
    throw new Refused('load', `the component exports ${wrong.map((i) => found[i].key).join(', ')}; this page speaks agent:recovery@0.1.x`);
  }
  const [classify, decide, backoff, , , render, meta] = INTERFACES.map((i) => root[found[i].key]);
  return {
    classifyJson: classify.classifyJson,
    decideJson: decide.decideJson,
    delay: backoff.delay,
    renderJson: render.renderJson,
    info: meta.info,
    smokeTests: meta.smokeTests,
  };
}

/** A loaded policy: its identity and its functions. */
function policy(api, sha, size, source) {
  const info = api.info();
  return { ...api, identity: { name: info.name, version: info.version, contract: info.contract, description: info.description, sha256: sha, size, source } };
}

/** The reference policy that build.mjs transpiled into policy/. */
export async function loadReference() {
  const base = new URL('./policy/', import.meta.url);
  const manifest = await (await fetch(new URL('manifest.json', base))).json();
  const bytes = new Uint8Array(await (await fetch(new URL('component.wasm', base))).arrayBuffer());
  const sha = await sha256(bytes);
  if (sha !== manifest.sha256) throw new Error(`policy/component.wasm has sha256 ${sha}, the manifest says ${manifest.sha256}; rebuild the playground`);
  const mod = await import(new URL('policy.js', base).href);
  const modules = new Map();
  for (const name of manifest.coreModules) modules.set(name, await WebAssembly.compileStreaming(fetch(new URL(name, base))));
  const root = await instantiate(mod.instantiate, modules, manifest.imports);
  return policy(bindExports(root), sha, bytes.length, 'reference');
}

let bindgen;

/** jco's bindgen component, loaded on first use (3.4 MB of wasm). */
async function generator() {
  bindgen ??= import('./bindgen/js-component-bindgen-component.js').then(async (m) => {
    await m.$init;
    return m.generate;
  });
  return bindgen;
}

/**
 * Check a candidate component, in the hosts' order (run in a worker). Resolves
 * to `{identity, files, imports}` (what `instantiateChecked` needs), or rejects
 * with `Refused` naming the stage. `report(stage, text)` is called as each
 * check passes.
 */
export async function checkCandidate(bytes, name, pin, report) {
  if (bytes.length > MAX_BYTES) throw new Refused('read', `${name} is ${bytes.length} bytes, over the limit of ${MAX_BYTES}; a policy is a few MB at most`);
  report('read', `${bytes.length} bytes`);
  const sha = await sha256(bytes);
  if (pin) {
    if (!/^[0-9a-f]{64}$/.test(pin)) throw new Refused('digest', `the pinned sha256 '${pin}' is not 64 lowercase hex digits; paste the digest from \`agent-recovery check\``);
    if (pin !== sha) throw new Refused('digest', `${name} has sha256 ${sha}, not the pinned ${pin}; nothing was compiled`);
    report('digest', `matches the pin ${sha.slice(0, 16)}…`);
  } else {
    report('digest', `sha256 ${sha} (no pin)`);
  }
  const magic = [0x00, 0x61, 0x73, 0x6d];
  if (bytes.length < 8 || !magic.every((b, i) => bytes[i] === b)) {
    throw new Refused('load', `${name} (${bytes.length} bytes) is not a WebAssembly binary (no \\0asm header); pick a .wasm component built for wasm32-wasip2`);
  }
  if (!(bytes[4] === 0x0d && bytes[5] === 0x00 && bytes[6] === 0x01 && bytes[7] === 0x00)) {
    throw new Refused('load', `${name} is a core WebAssembly module, not a component; build it for wasm32-wasip2 (a component)`);
  }
  let out;
  try {
    const generate = await generator();
    out = generate(bytes, {
      name: 'candidate',
      map: [],
      instantiation: { tag: 'async' },
      noComponentErrorWrapping: false,
      noTypescript: true,
      noNodejsCompat: true,
      base64Cutoff: 0,
      validLiftingOptimization: false,
      tracing: false,
      tlaCompat: false,
      noNamespacedExports: false,
      multiMemory: false,
    });
  } catch (e) {
    throw new Refused('load', `${name} is not a loadable component (${errorText(e)}); build it from the agent:recovery WIT`);
  }
  const imports = importNames(out.imports);
  const denied = imports.filter((n) => !Object.hasOwn(GRANTED, n));
  if (denied.length > 0) {
    throw new Refused('load', `${name} imports ${denied.join(', ')}, which a policy is not granted; a policy may import only wasi:cli, wasi:io, wasi:clocks, wasi:random`);
  }
  const files = Object.fromEntries(out.files);
  let api;
  try {
    api = await bindFiles(files, imports);
  } catch (e) {
    throw e instanceof Refused ? e : new Refused('load', `${name} did not instantiate (${errorText(e)})`);
  }
  const loaded = policy(api, sha, bytes.length, name);
  if (!/^0\.1\.\d+$/.test(loaded.identity.contract)) {
    throw new Refused('load', `${name} speaks contract ${loaded.identity.contract}; this page speaks 0.1.x`);
  }
  report('load', `implements agent:recovery/recovery-policy@0.1.0; imports ${imports.join(', ')}`);
  // The page starts the verify deadline at this report.
  let cases;
  try {
    cases = JSON.parse(api.smokeTests());
  } catch (e) {
    throw new Refused('verify', `${name} has no usable smoke set (${errorText(e)})`);
  }
  if (!Array.isArray(cases) || cases.length === 0) throw new Refused('verify', `${name} returns an empty smoke set; a policy must ship at least one smoke case`);
  cases.forEach((c, i) => {
    const obs = JSON.stringify(c.observation);
    const ctx = c.context === undefined ? '{}' : JSON.stringify(c.context);
    let d;
    try {
      d = JSON.parse(api.decideJson(obs, ctx));
    } catch (e) {
      throw new Refused('verify', `${name} failed smoke case ${i} (${obs}): ${errorText(e)}`);
    }
    for (const [field, got] of [['action', d.action], ['code', d.envelope?.code]]) {
      const want = c.expect?.[field];
      if (want !== undefined && want !== got) {
        throw new Refused('verify', `${name} failed smoke case ${i}: expected ${field} ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
      }
    }
  });
  report('verify', `its smoke set passed (${cases.length} cases)`);
  return { identity: loaded.identity, files, imports };
}

/** Compile, import and instantiate transpiled files (async instantiation mode). */
async function bindFiles(files, imports) {
  const jsName = Object.keys(files).find((n) => n.endsWith('.js'));
  const modules = new Map();
  for (const n of Object.keys(files).filter((f) => f.endsWith('.wasm'))) modules.set(n, await WebAssembly.compile(files[n]));
  const url = URL.createObjectURL(new Blob([files[jsName]], { type: 'text/javascript' }));
  try {
    const mod = await import(url);
    return bindExports(await instantiate(mod.instantiate, modules, imports));
  } finally {
    URL.revokeObjectURL(url);
  }
}

/** The policy for a candidate the worker accepted (same bytes, not checked again). */
export async function instantiateChecked({ identity, files, imports }) {
  const api = await bindFiles(files, imports);
  return { ...api, identity };
}

/**
 * Check a candidate in a worker, under the deadlines; resolves to the policy,
 * or rejects with `Refused`. `report(stage, text)` as each check passes.
 */
export function loadCandidate(bytes, name, pin, report) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./candidate-worker.js', import.meta.url), { type: 'module' });
    let timer;
    const deadline = (ms, stage, message) => {
      clearTimeout(timer);
      timer = setTimeout(() => finish(new Refused(stage, message)), ms);
    };
    const finish = (error, checked) => {
      clearTimeout(timer);
      worker.terminate();
      if (error) reject(error);
      else instantiateChecked(checked).then(resolve, (e) => reject(new Refused('load', `${name} did not instantiate (${errorText(e)})`)));
    };
    deadline(LOAD_MS, 'load', `${name} did not transpile within ${LOAD_MS / 1000} s; try agent-recovery check`);
    worker.onmessage = ({ data }) => {
      if (data.type === 'stage') {
        report(data.stage, data.text);
        if (data.stage === 'load') {
          deadline(VERIFY_MS, 'verify', `${name} did not finish its smoke set within ${VERIFY_MS / 1000} s (it may loop forever); a host stops it by fuel, this page by a deadline`);
        }
      } else if (data.type === 'refused') {
        finish(new Refused(data.stage, data.message));
      } else if (data.type === 'accepted') {
        finish(null, data.checked);
      }
    };
    worker.onerror = (e) => {
      e.preventDefault?.();
      finish(new Refused('load', `the check of ${name} stopped (${e.message ?? 'worker error'})`));
    };
    worker.postMessage({ bytes, name, pin }, [bytes.buffer]);
  });
}
