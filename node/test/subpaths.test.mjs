// package.json "exports": every subpath has a `types` file and a module, and the
// types file declares exactly the module's runtime exports, each with its kind
// (read with the TypeScript compiler API, as declarations.test.mjs does for
// index.d.ts). The options an adapter accepts are the options its types declare.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { MIDDLEWARE_DEFAULTS } from '../src/ai-sdk.js';

const NODE_DIR = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

/** The value exports of a .d.ts file: name -> kind. */
function declaredValues(path) {
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const values = new Map();
  const exported = (node) => ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Export;
  for (const s of source.statements) {
    if (ts.isClassDeclaration(s) && exported(s)) values.set(s.name.text, 'class');
    else if (ts.isFunctionDeclaration(s) && exported(s)) values.set(s.name.text, 'function');
    else if (ts.isVariableStatement(s) && exported(s)) for (const d of s.declarationList.declarations) values.set(d.name.getText(source), 'const');
    else if (ts.isEnumDeclaration(s) || ts.isModuleDeclaration(s) || ts.isExportDeclaration(s) || ts.isExportAssignment(s)) {
      assert.fail(`${path}: ${ts.SyntaxKind[s.kind]} is not handled by this test`);
    }
  }
  return values;
}

const subpaths = Object.entries(pkg.exports).filter(([k]) => k !== '.');

test('package.json exports the adapters, each with types and a module, listed in "files"', () => {
  for (const k of ['./ai-sdk', './openai-agents']) assert.ok(pkg.exports[k], `package.json exports ${k}`);
  for (const [, entry] of subpaths) {
    assert.deepEqual(Object.keys(entry), ['types', 'default'], 'types must come first (TypeScript reads the first match)');
    assert.ok(pkg.files.includes(entry.types.replace('./', '')), `${entry.types} is in "files"`);
  }
});

for (const [subpath, entry] of subpaths) {
  test(`${subpath}: ${entry.types} declares exactly the runtime exports of ${entry.default}`, async () => {
    const mod = await import(new URL(`../${entry.default}`, import.meta.url));
    const declared = declaredValues(`${NODE_DIR}${entry.types.replace('./', '')}`);
    assert.deepEqual([...declared.keys()].sort(), Object.keys(mod).sort());
    for (const [name, kind] of declared) {
      if (kind === 'const') assert.notEqual(typeof mod[name], 'function', `${name} is declared as a constant`);
      else assert.equal(typeof mod[name], 'function', `${name} is declared as a ${kind}`);
    }
  });
}

test('recoveryMiddleware: the options it accepts are RecoveryMiddlewareOptions (inherited members included)', () => {
  const file = `${NODE_DIR}ai-sdk.d.ts`;
  const program = ts.createProgram([file], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, strict: true, noEmit: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const decl = source.statements.find((s) => ts.isInterfaceDeclaration(s) && s.name.text === 'RecoveryMiddlewareOptions');
  const names = checker.getPropertiesOfType(checker.getTypeAtLocation(decl)).map((p) => p.name).sort();
  assert.deepEqual(names, Object.keys(MIDDLEWARE_DEFAULTS).sort());
});
