// better-sqlite3 installed without its native binding (what `npm install
// --ignore-scripts` leaves): opening a SqliteStore, or the local spool of a
// redis:// store, names the missing binding and the fix, not the file.
//
// The package tree is a copy of this one's: src/ and every installed package,
// linked, but better-sqlite3 copied without its build/ folder.

import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const PKG = fileURLToPath(new URL('..', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'agent-recovery-nobinding-'));
after(() => rmSync(root, { recursive: true, force: true }));

function packageWithoutBinding() {
  cpSync(join(PKG, 'src'), join(root, 'src'), { recursive: true });
  cpSync(join(PKG, 'package.json'), join(root, 'package.json'));
  const modules = join(root, 'node_modules');
  mkdirSync(modules);
  for (const name of readdirSync(join(PKG, 'node_modules'))) {
    if (name === 'better-sqlite3' || name.startsWith('.')) continue;
    symlinkSync(join(PKG, 'node_modules', name), join(modules, name));
  }
  cpSync(join(PKG, 'node_modules', 'better-sqlite3'), join(modules, 'better-sqlite3'), {
    recursive: true,
    filter: (src) => !src.split(/[\\/]/).includes('build') && !src.split(/[\\/]/).includes('prebuilds'),
  });
  return root;
}

const pkg = packageWithoutBinding();
const store = await import(join(pkg, 'src', 'store.js'));
const redis = await import(join(pkg, 'src', 'store-redis.js'));

function assertBindingError(e) {
  assert.ok(e instanceof store.StoreError, `a StoreError, got ${e}`);
  assert.equal(e.kind, 'io');
  assert.match(e.message, /better-sqlite3's native binding/);
  assert.match(e.message, /npm rebuild better-sqlite3/);
  assert.match(e.message, /fallback=none/);
  assert.doesNotMatch(e.message, /check that the directory exists/);
  return true;
}

test('the package really lacks the binding: better-sqlite3 loads, a database does not open', async () => {
  const { createRequire } = await import('node:module');
  const Driver = createRequire(join(pkg, 'src', 'store.js'))('better-sqlite3');
  assert.throws(() => new Driver(':memory:'), /bindings/i);
});

test('SqliteStore without the binding names the binding and the fix', () => {
  assert.throws(() => new store.SqliteStore(join(root, 'a.db')), assertBindingError);
});

test('a redis:// store whose spool cannot open names the binding and fallback=none', async () => {
  // A port nobody listens on: Redis is unreachable, so openStore opens the spool.
  const port = await new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
  const url = `redis://127.0.0.1:${port}/0?spool=${encodeURIComponent(join(root, 'spool.sqlite'))}&timeout_ms=200&connect_timeout_ms=200`;
  assert.throws(() => redis.openStore(url), assertBindingError);
});
