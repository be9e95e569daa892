// index.d.ts against the code: every runtime export of src/index.js is declared
// and every declared value exists, with the kind declared (a class or function
// is a function, a `typeof X` constant is X itself, a class's declared methods
// exist). index.d.ts is read with the TypeScript compiler's own parser (the
// `typescript` devDependency is pinned to 6.x, whose compiler API is stable;
// TypeScript 7 ships its API under `typescript/unstable/*`).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import ts from 'typescript';
import * as api from '../src/index.js';
import { RUNTIME_OPTIONS, STEP_OPTIONS } from '../src/step.js';
import { TELEMETRY_PROVIDERS } from '../src/telemetry.js';

const DTS = new URL('../index.d.ts', import.meta.url);

/** The value exports of index.d.ts: name -> {kind, node}. Types (interfaces, type aliases) are not values. */
function declaredValues() {
  const source = ts.createSourceFile('index.d.ts', readFileSync(DTS, 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const values = new Map();
  const exported = (node) => ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Export;
  for (const statement of source.statements) {
    if (ts.isClassDeclaration(statement) && exported(statement)) {
      values.set(statement.name.text, { kind: 'class', node: statement });
    } else if (ts.isFunctionDeclaration(statement) && exported(statement)) {
      values.set(statement.name.text, { kind: 'function', node: statement });
    } else if (ts.isVariableStatement(statement) && exported(statement)) {
      for (const decl of statement.declarationList.declarations) values.set(decl.name.getText(source), { kind: 'const', node: decl });
    } else if (ts.isEnumDeclaration(statement) || ts.isModuleDeclaration(statement) || ts.isExportDeclaration(statement) || ts.isExportAssignment(statement)) {
      // Not used by index.d.ts today; a new form must be taught to this test rather than skipped.
      assert.fail(`index.d.ts: ${ts.SyntaxKind[statement.kind]} at line ${source.getLineAndCharacterOfPosition(statement.pos).line + 1} is not handled by this test`);
    }
  }
  return values;
}

const declared = declaredValues();

/** The member names of a type literal or interface node. */
function memberNames(node) {
  return node.members.filter((m) => ts.isPropertySignature(m) || ts.isMethodSignature(m)).map((m) => m.name.getText()).sort();
}

/** The members of `export interface name` in index.d.ts. */
function interfaceMembers(name) {
  const source = ts.createSourceFile('index.d.ts', readFileSync(DTS, 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found = source.statements.find((s) => ts.isInterfaceDeclaration(s) && s.name.text === name);
  assert.ok(found, `index.d.ts declares interface ${name}`);
  return memberNames(found);
}

test('index.d.ts declares every runtime export, and nothing that is not exported', () => {
  const runtime = Object.keys(api).sort();
  const names = [...declared.keys()].sort();
  assert.deepEqual(
    runtime.filter((n) => !declared.has(n)),
    [],
    'exported by src/index.js but not declared in index.d.ts',
  );
  assert.deepEqual(
    names.filter((n) => !(n in api)),
    [],
    'declared in index.d.ts but not exported by src/index.js',
  );
  assert.ok(names.length > 50, `only ${names.length} values declared`);
});

test('each declared value has the declared kind', () => {
  for (const [name, { kind, node }] of declared) {
    const value = api[name];
    if (kind === 'class' || kind === 'function') {
      assert.equal(typeof value, 'function', `${name} is declared as a ${kind}`);
    } else if (node.type && ts.isTypeQueryNode(node.type)) {
      // `export declare const X: typeof Y`: an alias of Y, the same object.
      const target = node.type.exprName.getText();
      assert.equal(value, api[target], `${name} is declared as typeof ${target}`);
    } else {
      assert.notEqual(typeof value, 'function', `${name} is declared as a constant, not a function`);
      assert.notEqual(value, undefined, `${name} is declared as a constant`);
    }
  }
});

test("each declared class's methods exist (static on the class, the others on its prototype)", () => {
  let checked = 0;
  for (const [name, { kind, node }] of declared) {
    if (kind !== 'class') continue;
    for (const member of node.members) {
      if (!ts.isMethodDeclaration(member)) continue;
      const method = member.name.getText();
      const isStatic = (ts.getCombinedModifierFlags(member) & ts.ModifierFlags.Static) !== 0;
      const holder = isStatic ? api[name] : api[name].prototype;
      assert.equal(typeof holder[method], 'function', `${name}${isStatic ? '.' : '.prototype.'}${method} is declared in index.d.ts`);
      checked += 1;
    }
  }
  assert.ok(checked > 50, `only ${checked} methods checked`);
});

// Public-looking members the package uses across its modules, not part of the API:
// each is marked @internal (or is only called by the package) in the source.
const INTERNAL = new Set([
  'PolicyError.fromPayload', // src/instance.js and src/loop.js: from a jco ComponentError payload
  'RedisStore.prototype.sampleTime', // @internal: ServerClock's TIME sample
  'DeadLetters.prototype.runPending', // @internal: replay and runtime.recover
  'DeadLetters.prototype.pendingReplays', // @internal: runtime.recover
]);

test("every public member of an exported class is declared (or listed as internal here)", () => {
  const undeclared = [];
  for (const [name, { kind, node }] of declared) {
    if (kind !== 'class') continue;
    const members = new Set(node.members.filter((m) => m.name).map((m) => m.name.getText()));
    for (const [holder, where] of [[api[name], `${name}.`], [api[name].prototype, `${name}.prototype.`]]) {
      for (const member of Object.getOwnPropertyNames(holder)) {
        if (['constructor', 'length', 'name', 'prototype'].includes(member) || member.startsWith('_')) continue;
        if (!members.has(member) && !INTERNAL.has(where + member)) undeclared.push(where + member);
      }
    }
  }
  assert.deepEqual(undeclared, [], 'public members missing from index.d.ts');
  for (const internal of INTERNAL) {
    const [cls, ...path] = internal.split('.');
    const holder = path.length === 2 ? api[cls].prototype : api[cls];
    assert.equal(typeof holder[path.at(-1)], 'function', `${internal} is listed as internal but does not exist`);
  }
});

test('the options the code accepts are the options index.d.ts declares', () => {
  // Each list is the one the code checks options against (an unknown one is an error).
  assert.deepEqual(interfaceMembers('RuntimeOptions'), [...RUNTIME_OPTIONS].sort(), 'Runtime.create() options');
  assert.deepEqual(interfaceMembers('StepOptions'), [...STEP_OPTIONS].sort(), 'run.step() options');
  const ctor = declared.get('Telemetry').node.members.find(ts.isConstructorDeclaration);
  assert.deepEqual(memberNames(ctor.parameters[0].type), [...TELEMETRY_PROVIDERS].sort(), 'new Telemetry() providers');
});

test('Response is the deprecated name of RawOutcome', () => {
  assert.equal(api.Response, api.RawOutcome);
  const doc = ts.getJSDocTags(declared.get('Response').node).map((t) => t.tagName.text);
  assert.ok(doc.includes('deprecated'), `the Response declaration's JSDoc tags: ${doc}`);
});

test('each subpath export (package.json "exports") declares exactly its module\'s runtime exports', async () => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  const subpaths = Object.entries(pkg.exports).filter(([path]) => path !== '.');
  assert.ok(subpaths.length >= 1, 'no subpath exports');
  for (const [path, { types, default: main }] of subpaths) {
    assert.ok(pkg.files.includes(types.replace(/^\.\//, '')), `${types} is in package.json "files"`);
    const source = ts.createSourceFile(types, readFileSync(new URL(`../${types}`, import.meta.url), 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    const values = new Map();
    const exported = (node) => ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Export;
    for (const s of source.statements) {
      if ((ts.isClassDeclaration(s) || ts.isFunctionDeclaration(s)) && exported(s)) values.set(s.name.text, s);
      else if (ts.isVariableStatement(s) && exported(s)) for (const d of s.declarationList.declarations) values.set(d.name.getText(source), d);
    }
    const mod = await import(new URL(`../${main}`, import.meta.url));
    assert.deepEqual(Object.keys(mod).sort(), [...values.keys()].sort(), `${path}: ${main} exports what ${types} declares`);
    for (const [name, node] of values) {
      if (ts.isClassDeclaration(node)) {
        for (const m of node.members.filter(ts.isMethodDeclaration)) {
          assert.equal(typeof mod[name].prototype[m.name.getText()], 'function', `${path}: ${name}.prototype.${m.name.getText()}`);
        }
        const publicMethods = Object.getOwnPropertyNames(mod[name].prototype).filter((m) => m !== 'constructor');
        const declaredMembers = new Set(node.members.filter((m) => m.name).map((m) => m.name.getText()));
        assert.deepEqual(publicMethods.filter((m) => !declaredMembers.has(m)), [], `${path}: ${name} members missing from ${types}`);
      } else if (ts.isFunctionDeclaration(node)) {
        assert.equal(typeof mod[name], 'function', `${path}: ${name} is a function`);
      } else {
        assert.notEqual(typeof mod[name], 'function', `${path}: ${name} is a constant`);
      }
    }
  }
});
