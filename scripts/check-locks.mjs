#!/usr/bin/env node
// Refuses an npm lock that a fresh machine cannot install: every package entry
// must carry a version. A version-less entry (an "inert placeholder") makes npm's
// arborist throw `Invalid Version:` in `npm ci` from an empty cache.
// Usage: node scripts/check-locks.mjs node/package-lock.json playground/package-lock.json
import { readFileSync } from 'node:fs';

let bad = 0;
for (const file of process.argv.slice(2)) {
  let lock;
  try {
    lock = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    console.error(`${file}: not a readable JSON lock (${e.message}); regenerate it with 'npm install --package-lock-only'`);
    bad++;
    continue;
  }
  for (const [path, entry] of Object.entries(lock.packages ?? {})) {
    if (path === '' || entry.link) continue;
    const problems = [];
    if (typeof entry.version !== 'string' || entry.version === '') problems.push('no version');
    if (problems.length) {
      console.error(`${file}: ${path}: ${problems.join(', ')}; regenerate the lock with 'npm install --package-lock-only' from package.json`);
      bad++;
    }
  }
}
if (bad) process.exit(1);
console.log(`locks ok: ${process.argv.slice(2).join(', ')}`);
