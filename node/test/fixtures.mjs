// Small policy components made at test time, to exercise what the reference
// never does: trap, answer wrongly, import too much, export too little.
//
// They are built from the repository's WIT with the wasm-tools that jco ships:
// `component embed --dummy` gives a core module whose every export traps; a few
// of its functions are then given real bodies in WAT (static answers), and
// `component new` wraps it back into a component.

import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as wasmTools from '@bytecodealliance/jco-transpile/wasm-tools';
import { REPO } from './helpers.mjs';

/** The WIT package as one source text (the embedder reads no files here). */
function witSource() {
  const dir = join(REPO, 'wit', 'agent-recovery@0.1.0');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.wit'))
    .sort();
  const texts = files.map((f) => readFileSync(join(dir, f), 'utf8'));
  const pkg = texts.map((t) => /^package [^;]+;/m.exec(t)?.[0]).find(Boolean);
  return `${pkg}\n${texts.map((t) => t.replace(/^package [^;]+;/m, '')).join('\n')}`;
}

/** A component whose every export traps. */
export async function trappingComponent() {
  const core = await wasmTools.componentEmbed({ dummy: true, witSource: witSource(), world: 'recovery-policy' });
  return wasmTools.componentNew(core, []);
}

/**
 * A component that imports `wasi:filesystem/preopens` (and traps everywhere):
 * refused before instantiation.
 */
export async function filesystemComponent() {
  const wit = `${witSource()}
world greedy {
  include recovery-policy;
  import wasi:filesystem/preopens@0.2.0;
}
package wasi:filesystem@0.2.0 {
  interface preopens {
    get-directories: func() -> list<string>;
  }
}
`;
  const core = await wasmTools.componentEmbed({ dummy: true, witSource: wit, world: 'greedy' });
  return wasmTools.componentNew(core, []);
}

/** A component that exports nothing. */
export function emptyComponent() {
  return wasmTools.parse('(component)');
}

/**
 * A tiny policy with fixed answers:
 * - info(): `{name, version: '0.0.1', contract: '0.1.0'}`;
 * - smoke-tests(): `smoke` (JSON text);
 * - decide-json(): always `decision` (JSON text), whatever it is asked;
 * - codes-json(): `[]`;
 * - every other export (classify-json among them) traps.
 */
export async function fixedComponent({ name, smoke, decision }) {
  const core = await wasmTools.componentEmbed({ dummy: true, witSource: witSource(), world: 'recovery-policy' });
  let wat = await wasmTools.print(core);

  const data = [];
  let next = 1024;
  const str = (s) => {
    const bytes = Buffer.from(s, 'utf8');
    const at = next;
    data.push(`(data (i32.const ${at}) "${[...bytes].map((b) => `\\${b.toString(16).padStart(2, '0')}`).join('')}")`);
    next += bytes.length + (8 - (bytes.length % 8));
    return [at, bytes.length];
  };
  const store = (area, words) =>
    `${words.map((w, i) => `(i32.store (i32.const ${area + 4 * i}) (i32.const ${w}))`).join(' ')} (i32.const ${area})`;

  const [n, nl] = str(name);
  const [v, vl] = str('0.0.1');
  const [c, cl] = str('0.1.0');
  const [d, dl] = str('a test fixture with fixed answers');
  const [s, sl] = str(smoke);
  const [k, kl] = str(decision);
  const [e, el] = str('[]');

  const bodies = {
    'meta@0.1|info': store(64, [n, nl, v, vl, c, cl, d, dl]),
    'meta@0.1|smoke-tests': store(128, [s, sl]),
    // result<string, policy-error>: tag 0 (ok) at +0, the string at +4.
    'decide@0.1|decide-json': store(160, [0, k, kl]),
    'registry@0.1|codes-json': store(192, [e, el]),
  };
  for (const [suffix, body] of Object.entries(bodies)) wat = setBody(wat, `agent:recovery/${suffix}`, body);
  // A bump allocator, so the host can pass strings in.
  wat = setBody(
    wat,
    'realloc',
    `(local i32)
    (global.set $heap (i32.and (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1))) (i32.sub (i32.const 0) (local.get 2))))
    (local.set 4 (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get 3)))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.div_u (global.get $heap) (i32.const 65536)) (i32.const 1))))))
    (local.get 4)`,
  );
  wat = wat.replace(/\(memory \(;0;\) 0\)/, '(memory (;0;) 1)');
  const heapStart = Math.ceil(next / 8) * 8;
  wat = wat.replace(/\n {2}\(@custom/, `\n  (global $heap (mut i32) (i32.const ${heapStart}))\n  ${data.join('\n  ')}\n  (@custom`);
  return wasmTools.componentNew(await wasmTools.parse(wat), []);
}

function setBody(wat, exportSuffix, body) {
  const esc = exportSuffix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = new RegExp(`\\(export "[^"]*${esc}" \\(func (\\d+)\\)\\)`).exec(wat);
  if (!m) throw new Error(`fixture: no export ending in ${exportSuffix}`);
  const re = new RegExp(`(\\(func \\(;${m[1]};\\) [^\\n]*\\n)\\s*unreachable\\n(\\s*)\\)`);
  if (!re.test(wat)) throw new Error(`fixture: function ${m[1]} (${exportSuffix}) is not a dummy body`);
  return wat.replace(re, (_all, head, indent) => `${head}    ${body}\n${indent})`);
}
