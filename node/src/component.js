// Loading a policy component: transpile (jco), check its imports, instantiate.
//
// The shipped reference is transpiled at build time into gen/ (`npm run build`);
// any other component is transpiled in-process with jco's transpiler
// (@bytecodealliance/jco-transpile, the engine of jco 1.35's `transpile`), in
// `instantiation: 'async'` mode, so this module, not the generated code, decides
// what the component is given.
//
// What a policy is given: only the WASI interfaces that Rust's standard library
// on wasm32-wasip2 needs (cli environment/exit/stdio/terminal, clocks, io,
// random). The environment is empty, and `exit` throws instead of ending the
// Node process. A component that imports anything else (filesystem, sockets,
// http, its own host interfaces) is refused. Stdio, clocks and random come from
// @bytecodealliance/preview2-shim, which is not a sandbox: they are the real
// process streams and clocks. See README, "Sandboxing".

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
// Only the shim modules a policy may use: the filesystem, sockets and http
// shims are never even loaded.
import * as cli from '@bytecodealliance/preview2-shim/cli';
import * as clocks from '@bytecodealliance/preview2-shim/clocks';
import * as io from '@bytecodealliance/preview2-shim/io';
import * as random from '@bytecodealliance/preview2-shim/random';
import { PolicyLoadError, PolicyRuntimeError } from './errors.js';

/** Where `npm run build` puts the transpiled reference policy. */
export const GEN_DIR = new URL('../gen/', import.meta.url);

/** The name the transpiled module and its core wasm files carry. */
const NAME = 'policy';

/** The WASI interfaces a policy may import, and what it gets for each. */
const GRANTED = Object.freeze({
  'wasi:cli/environment': {
    getEnvironment: () => [],
    getArguments: () => [],
    initialCwd: () => undefined,
  },
  'wasi:cli/exit': {
    exit(status) {
      throw new PolicyRuntimeError(
        `the policy called exit (${status?.tag ?? 'unknown'}); a policy must return an answer or a policy-error, never exit`,
      );
    },
    exitWithCode(code) {
      throw new PolicyRuntimeError(`the policy called exit with code ${code}; a policy must never exit`);
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

/** The names of the interfaces a policy may import. */
export const GRANTED_IMPORTS = Object.freeze(Object.keys(GRANTED));

/** Hex sha256 of some bytes. */
export function sha256(bytes) {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Options for the transpiler; the build script uses the same. */
/** The optional peer that loads custom policies: name and the version the bindings were made with. */
export const TRANSPILER = '@bytecodealliance/jco-transpile@0.15.0';

export const TRANSPILE_OPTIONS = Object.freeze({
  name: NAME,
  instantiation: 'async',
  // Keep jco's ComponentError wrapping: a top-level `result` error is thrown as
  // a ComponentError whose `.payload` is the WIT `policy-error`.
  noComponentErrorWrapping: false,
  emitTypescriptDeclarations: false,
  quiet: true,
});

/**
 * A transpiled component, ready to be instantiated (any number of times).
 * @typedef {{ instantiate: Function, modules: Map<string, WebAssembly.Module>, imports: string[], sha256: string, size: number, source: string }} Compiled
 */

const DEBUG_CHECK = 'if (!globalThis?.process?.env?.JCO_DEBUG) { return; }';

/**
 * The generated bindings, with one change: jco 1.35's debug logger reads
 * `process.env.JCO_DEBUG` (a getenv call in Node) on every one of the many log
 * calls each export makes, which was 40% of a cheap call's time. The flag is
 * read once, when the bindings load, instead. Without that exact line (another
 * jco version) the text is left as it is.
 */
export function bindingsSource(js) {
  const text = typeof js === 'string' ? js : Buffer.from(js).toString('utf8');
  if (!text.includes(DEBUG_CHECK)) return text;
  const head = 'const JCO_DEBUG_AT_LOAD = Boolean(globalThis?.process?.env?.JCO_DEBUG);\n';
  return head + text.replaceAll(DEBUG_CHECK, 'if (!JCO_DEBUG_AT_LOAD) { return; }');
}

/**
 * Transpiled components by sha256, so loading the same bytes twice is cheap.
 * Bounded: a loaded policy keeps its own reference, the cache only saves work.
 */
const cache = new Map();
const CACHE_LIMIT = 4;

function remember(digest, pending) {
  cache.set(digest, pending);
  while (cache.size > CACHE_LIMIT) cache.delete(cache.keys().next().value);
}

/** Transpile component bytes in-process and compile its core modules. */
export async function compileBytes(bytes, source) {
  const digest = sha256(bytes);
  if (!cache.has(digest)) {
    const pending = transpileAndImport(bytes).catch((e) => {
      cache.delete(digest);
      throw e;
    });
    remember(digest, pending);
  }
  const { instantiate, modules, imports } = await cache.get(digest);
  return { instantiate, modules, imports, sha256: digest, size: bytes.length, source };
}

async function transpileAndImport(bytes) {
  // Imported lazily: the transpiler is only needed for components other than
  // the shipped reference, takes a moment to initialise, and is an optional
  // peer dependency (with binaryen it is ~100 MB that a user of the reference
  // never needs).
  let transpileBytes;
  try {
    ({ transpileBytes } = await import('@bytecodealliance/jco-transpile'));
  } catch (e) {
    if (e?.code !== 'ERR_MODULE_NOT_FOUND') throw e;
    throw new PolicyLoadError(
      'transpiler_missing',
      `loading a policy other than the packaged reference needs the optional transpiler; install it with \`npm install ${TRANSPILER}\` (the shipped reference loads without it)`,
      { cause: e },
    );
  }
  let out;
  try {
    out = await transpileBytes(new Uint8Array(bytes), { ...TRANSPILE_OPTIONS });
  } catch (e) {
    throw new PolicyLoadError(
      'transpile',
      `the bytes are not a loadable WebAssembly component (${firstLine(e)}); pass a wasm32-wasip2 component built from the agent:recovery WIT`,
      { cause: e },
    );
  }
  const files = out.files;
  const js = files[`${NAME}.js`];
  let mod;
  try {
    const url = `data:text/javascript;base64,${Buffer.from(bindingsSource(js)).toString('base64')}`;
    mod = await import(url);
  } catch (e) {
    throw new PolicyLoadError('transpile', `the transpiled bindings did not load (${firstLine(e)}); please report this`, {
      cause: e,
    });
  }
  const modules = await compileCoreModules((name) => files[name], Object.keys(files));
  return { instantiate: mod.instantiate, modules, imports: importNames(out.imports) };
}

/** Load the reference policy that `npm run build` transpiled into gen/. */
export async function compileReference() {
  let manifest;
  let bytes;
  try {
    manifest = JSON.parse(await readFile(new URL('manifest.json', GEN_DIR), 'utf8'));
    bytes = await readFile(new URL('component.wasm', GEN_DIR));
  } catch (e) {
    throw new PolicyLoadError(
      'read',
      `the reference policy is not built (${fileURLToPath(GEN_DIR)} is missing or incomplete); run \`npm run build\` in node/ first`,
      { cause: e },
    );
  }
  const digest = sha256(bytes);
  if (digest !== manifest.sha256) {
    throw new PolicyLoadError(
      'digest_mismatch',
      `gen/component.wasm has sha256 ${digest} but gen/manifest.json says ${manifest.sha256}; run \`npm run build\` again`,
    );
  }
  if (!cache.has(digest)) {
    const pending = (async () => {
      const mod = await import(new URL(`${NAME}.js`, GEN_DIR).href);
      const files = {};
      for (const name of manifest.coreModules) files[name] = await readFile(new URL(name, GEN_DIR));
      const modules = await compileCoreModules((n) => files[n], manifest.coreModules);
      return { instantiate: mod.instantiate, modules, imports: manifest.imports };
    })().catch((e) => {
      cache.delete(digest);
      throw e instanceof PolicyLoadError
        ? e
        : new PolicyLoadError('read', `gen/ could not be loaded (${firstLine(e)}); run \`npm run build\` again`, {
            cause: e,
          });
    });
    remember(digest, pending);
  }
  const { instantiate, modules, imports } = await cache.get(digest);
  return { instantiate, modules, imports, sha256: digest, size: bytes.length, source: 'reference' };
}

async function compileCoreModules(read, names) {
  const modules = new Map();
  for (const name of names.filter((n) => n.endsWith('.wasm'))) {
    try {
      modules.set(name, await WebAssembly.compile(read(name)));
    } catch (e) {
      throw new PolicyLoadError('transpile', `core module ${name} did not compile (${firstLine(e)})${compileHint(e)}`, {
        cause: e,
      });
    }
  }
  return modules;
}

/**
 * A hint for a core module this Node cannot compile. Components built with
 * componentize-py (a policy written in Python) use WebAssembly extended
 * constant expressions, which Node 20 compiles only behind a flag.
 */
export function compileHint(e) {
  if (!/not allowed in constant expressions/.test(firstLine(e))) return '';
  return '; the component uses WebAssembly extended constant expressions (componentize-py output does): run Node 20 with `--experimental-wasm-extended-const` (a flag of the node command, not allowed in NODE_OPTIONS), or a Node that has them on by default (22 does)';
}

/** `wasi:cli/environment@0.2.12` -> `wasi:cli/environment`. */
export function importNames(imports) {
  return [...new Set(imports.map((n) => n.replace(/@[^/]*$/, '')))].sort();
}

/** Refuse a component that imports anything a policy is not granted. */
export function checkImports(compiled) {
  const denied = compiled.imports.filter((n) => !Object.hasOwn(GRANTED, n));
  if (denied.length > 0) {
    throw new PolicyLoadError(
      'imports',
      `the component imports ${denied.join(', ')}, which a policy is not granted; a policy may import only ${GRANTED_IMPORTS.join(', ')} (pure functions over data: no filesystem, no network)`,
    );
  }
}

/**
 * Instantiate synchronously (also used to replace an instance after a trap).
 * `onCore(instance)`, when given, sees each core WebAssembly.Instance made.
 */
export function instantiate(compiled, onCore) {
  const getCoreModule = (name) => {
    const m = compiled.modules.get(name);
    if (!m) throw new Error(`core module ${name} is missing`);
    return m;
  };
  const imports = {};
  for (const name of compiled.imports) imports[name] = GRANTED[name];
  let root;
  try {
    root = compiled.instantiate(getCoreModule, imports, (module, imp) => {
      const instance = new WebAssembly.Instance(module, imp);
      onCore?.(instance);
      return instance;
    });
  } catch (e) {
    throw new PolicyLoadError('instantiate', `the component did not instantiate (${firstLine(e)})`, { cause: e });
  }
  if (root && typeof root.then === 'function') {
    throw new PolicyLoadError('instantiate', 'the component instantiated asynchronously; this wrapper needs synchronous exports');
  }
  return root;
}

/** The contract version this wrapper speaks; a candidate must export `@0.1.x`. */
export const CONTRACT = '0.1.0';

const INTERFACES = ['classify', 'decide', 'backoff', 'registry', 'idempotency', 'render', 'meta'];

/**
 * The exports of an instance, as the plain functions the wrapper calls.
 * Throws PolicyLoadError('contract') when an interface is missing or speaks
 * another contract version.
 */
export function bindExports(root) {
  const found = {};
  for (const key of Object.keys(root ?? {})) {
    const m = /^agent:recovery\/([a-z-]+)@(\d+)\.(\d+)\.(\d+)/.exec(key);
    // The reference exports `runtime` twice (0.2: JSON text, whose render-named
    // this wrapper calls; 0.3: typed): the 0.2 one is kept.
    if (m && !(m[1] === 'runtime' && found.runtime?.version === '0.2.0')) {
      found[m[1]] = { key, version: `${m[2]}.${m[3]}.${m[4]}`, compatible: m[2] === '0' && m[3] === '1' };
    }
  }
  const missing = INTERFACES.filter((i) => !found[i]);
  if (missing.length > 0) {
    throw new PolicyLoadError(
      'contract',
      `the component does not export agent:recovery ${missing.join(', ')}; build it against the agent:recovery@${CONTRACT} world recovery-policy`,
    );
  }
  const wrong = INTERFACES.filter((i) => !found[i].compatible);
  if (wrong.length > 0) {
    throw new PolicyLoadError(
      'contract',
      `the component exports ${wrong.map((i) => found[i].key).join(', ')}, but this wrapper speaks agent:recovery@${CONTRACT}; use a wrapper for that contract version`,
    );
  }
  const get = (i) => root[found[i].key];
  const [classify, decide, backoff, registry, idempotency, render, meta] = INTERFACES.map(get);
  return {
    classifyJson: classify.classifyJson,
    decideJson: decide.decideJson,
    delay: backoff.delay,
    codesJson: registry.codesJson,
    errorsBlock: registry.errorsBlock,
    key: idempotency.key,
    renderJson: render.renderJson,
    // The 0.2 runtime interface's render-named (the reference has it; a 0.1 policy does not).
    renderNamed: found.runtime === undefined ? undefined : root[found.runtime.key]?.renderNamed,
    info: meta.info,
    smokeTests: meta.smokeTests,
  };
}

/** Read a component from a path, URL or bytes. */
export async function readSource(source) {
  if (source instanceof Uint8Array) return { bytes: source, label: 'bytes' };
  if (source instanceof ArrayBuffer) return { bytes: new Uint8Array(source), label: 'bytes' };
  if (typeof source === 'string' || source instanceof URL) {
    try {
      return { bytes: await readFile(source), label: source instanceof URL ? fileURLToPath(source) : source };
    } catch (e) {
      throw new PolicyLoadError('read', `cannot read the component at ${source} (${e.code ?? firstLine(e)}); check the path`, {
        cause: e,
      });
    }
  }
  throw new PolicyLoadError(
    'read',
    `a component source must be a path, a file URL, a Uint8Array or an ArrayBuffer, got ${source === null ? 'null' : typeof source}`,
  );
}

export function firstLine(e) {
  return String(e?.message ?? e).split('\n')[0];
}
