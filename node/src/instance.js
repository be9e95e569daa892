// One loaded policy component: its instance, its identity, and the guard
// around every call that turns a policy-error into a PolicyError and a trap into
// a PolicyRuntimeError (after which the instance is replaced on the next call).

import { bindExports, checkImports, compileBytes, compileReference, instantiate, readSource, sha256 } from './component.js';
import { PolicyError, PolicyLoadError, PolicyRuntimeError, isComponentError } from './errors.js';
import { signatureFor, verifySignature } from './signing.js';

export class PolicyInstance {
  #compiled;
  #api = null;
  /** Identity: name, version, contract, description, sha256, size, source, loadedAt. */
  identity;
  /** Traps seen so far (each one replaced the instance). */
  traps = 0;
  #registry;

  constructor(compiled) {
    this.#compiled = compiled;
    this.#api = bindExports(instantiate(compiled));
    const info = this.call('info', (api) => api.info());
    for (const field of ['name', 'version', 'contract']) {
      if (typeof info?.[field] !== 'string' || info[field] === '') {
        throw new PolicyLoadError('contract', `the component's info() has no ${field}; meta.info must name the policy`);
      }
    }
    this.identity = Object.freeze({
      name: info.name,
      version: info.version,
      contract: info.contract,
      description: info.description ?? '',
      sha256: compiled.sha256,
      size: compiled.size,
      source: compiled.source,
      loadedAt: new Date().toISOString(),
    });
  }

  /**
   * Load a component: the reference (source undefined), a path, a URL or bytes.
   * `sha256` pins the digest of the component bytes; `requireSignature`
   * (`{trustedKeys, signature?}`) requires a valid signature of them (the
   * embedded reference needs none: it ships with the package).
   */
  static async load(source, { sha256: pin, requireSignature } = {}) {
    let compiled;
    if (source === undefined || source === null) {
      compiled = await compileReference();
      checkPin(pin, compiled.sha256);
    } else {
      const { bytes, label } = await readSource(source);
      // Check the pin and the signature before transpiling: refused bytes are never parsed.
      checkPin(pin, sha256(bytes));
      if (requireSignature) {
        verifySignature(bytes, await signatureFor(source, requireSignature), requireSignature.trustedKeys, label);
      }
      compiled = await compileBytes(bytes, label);
    }
    checkImports(compiled);
    return new PolicyInstance(compiled);
  }

  /** The policy's short identity, as attached to every decision. */
  get stamp() {
    const { name, version, sha256: digest } = this.identity;
    return { name, version, sha256: digest };
  }

  /** The registry, parsed once. */
  registry() {
    if (this.#registry === undefined) {
      const text = this.call('codesJson', (api) => api.codesJson());
      let rows;
      try {
        rows = JSON.parse(text);
      } catch (e) {
        throw new PolicyRuntimeError(`${this.identity.name} printed an invalid registry (${e.message}); report it`, {
          cause: e,
          code: 'invalid-output',
        });
      }
      if (!Array.isArray(rows)) throw new PolicyRuntimeError(`${this.identity.name} printed a registry that is not an array; report it`, {
          code: 'invalid-output',
        });
      this.#registry = rows;
    }
    return this.#registry;
  }

  /** Call an export; policy-errors become PolicyError, anything else a PolicyRuntimeError. */
  call(what, fn) {
    if (this.#api === null) {
      try {
        this.#api = bindExports(instantiate(this.#compiled));
      } catch (e) {
        throw new PolicyRuntimeError(`the policy could not be re-instantiated after a trap (${e.message})`, { cause: e });
      }
    }
    try {
      return fn(this.#api);
    } catch (e) {
      if (isComponentError(e)) throw PolicyError.fromPayload(e.payload);
      if (e instanceof PolicyError) throw e;
      // A trap (or a bug in the bindings) may leave the instance in any state:
      // drop it, and instantiate a fresh one on the next call.
      this.#api = null;
      this.traps += 1;
      const who = this.identity ? `${this.identity.name} ${this.identity.version}` : 'the policy';
      throw new PolicyRuntimeError(
        `${who} failed in ${what} (${e?.message ?? e}); this is a bug in the policy, not an answer about the input: report it with the input (the instance is replaced on the next call)`,
        { cause: e },
      );
    }
  }
}

function checkPin(pin, actual) {
  if (pin === undefined || pin === null) return;
  const want = String(pin).replace(/^sha256:/, '').toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(want)) {
    throw new PolicyLoadError(
      'digest_mismatch',
      `sha256 pin ${JSON.stringify(String(pin))} is not 64 hex digits; pass the hex sha256 of the component file (\`sha256sum policy.wasm\`)`,
      { code: 'invalid-argument' },
    );
  }
  if (want !== actual) {
    throw new PolicyLoadError(
      'digest_mismatch',
      `the component's sha256 is ${actual}, not the pinned ${want}; refusing it (check that you are loading the file you meant)`,
    );
  }
}
