// Where the decision log's lines go (docs/decision-logs.md). The component
// writes each line (one JSON object per decision) and hands it over in a
// `log` effect; this module only appends the bytes and a newline to a file,
// or passes the line to `write(line)`. The twin of
// host/src/runtime/decision_log.rs and python/src/agent_recovery/_decision_log.py.
// A line the file cannot take is counted (`failedWrites`), never thrown out
// of the step: the audit log does not stop the run it records.

import { open, rename } from 'node:fs/promises';
import { describe } from './json.js';
import { checkKeys, invalidConfig } from './step.js';

/** A file is renamed to `PATH.1` before a line would take it past this size (64 MiB). */
export const ROTATE_BYTES = 64 * 1024 * 1024;

/**
 * Appends lines to a file, one write after another, rotating it at
 * ROTATE_BYTES. A line that cannot be written is counted in `failedWrites`
 * (the first one reported with process.emitWarning), and the run goes on.
 */
class FileSink {
  #path;
  #handle = null;
  #size = 0;
  #queue = Promise.resolve();
  failedWrites = 0;

  constructor(path) {
    this.#path = path;
  }

  write(line) {
    const data = Buffer.from(`${line}\n`, 'utf8');
    const next = this.#queue.then(() => this.#append(data)).catch((e) => this.#failed(e));
    this.#queue = next;
    return next;
  }

  async #failed(e) {
    // The handle is dropped (closed quietly): the next line opens the file again.
    const handle = this.#handle;
    this.#handle = null;
    if (handle !== null) await handle.close().catch(() => {});
    this.failedWrites += 1;
    if (this.failedWrites === 1) {
      process.emitWarning(
        `the decision log ${this.#path} cannot be written (${e?.message ?? e}); the runs go on and the lines it misses ` +
          'are counted in runtime.decisionLog.failedWrites; check the path and its permissions',
        { type: 'DecisionLogWarning', code: 'AGENT_RECOVERY_DECISION_LOG_WRITE' },
      );
    }
  }

  async #append(data) {
    if (this.#handle === null) {
      this.#handle = await open(this.#path, 'a');
      this.#size = (await this.#handle.stat()).size;
    }
    if (this.#size > 0 && this.#size + data.length > ROTATE_BYTES) {
      await this.#handle.close();
      this.#handle = null;
      await rename(this.#path, `${this.#path}.1`);
      this.#handle = await open(this.#path, 'a');
      this.#size = 0;
    }
    await this.#handle.write(data);
    this.#size += data.length;
  }
}

const OPTIONS = ['path', 'write', 'observation', 'maxRecordBytes'];

/** The identity of the policy deciding now (JSON text), or null: a Policy's active component, null for a custom decider. */
function identityOf(decider) {
  if (typeof decider?.describe !== 'function') return () => null;
  const text = (d) =>
    typeof d?.name === 'string' && typeof d.version === 'string' && typeof d.sha256 === 'string'
      ? JSON.stringify({ name: d.name, version: d.version, digest: `sha256:${d.sha256}` })
      : null;
  return () => {
    try {
      const d = decider.describe();
      return typeof d?.then === 'function' ? null : text(d);
    } catch {
      return null;
    }
  };
}

/**
 * The `decisionLog` option: `{ path }` (a file) or `{ write(line) }` (your
 * logger), with `observation: 'full' | 'digest'` and `maxRecordBytes`.
 * Returns `{ write, failedWrites, config, policy }` or null when the option is not given.
 */
export function decisionLog(option, decider) {
  if (option === undefined || option === null) return null;
  if (typeof option !== 'object') throw invalidConfig(`decisionLog must be { path } or { write(line) }, got ${describe(option)}`);
  checkKeys(option, OPTIONS, 'decisionLog');
  let write;
  let sink = null;
  if (typeof option.path === 'string' && option.path !== '' && option.write === undefined) {
    sink = new FileSink(option.path);
    const file = sink;
    write = (line) => file.write(line);
  } else if (typeof option.write === 'function' && option.path === undefined) {
    write = async (line) => {
      await option.write(line);
    };
  } else {
    throw invalidConfig('decisionLog needs exactly one of path (a file name) or write(line) (a function)');
  }
  const observation = option.observation ?? 'full';
  if (observation !== 'full' && observation !== 'digest') {
    throw invalidConfig(`decisionLog.observation is 'full' or 'digest', got ${describe(observation)}`);
  }
  const config = { observation };
  if (option.maxRecordBytes !== undefined) {
    if (!Number.isSafeInteger(option.maxRecordBytes)) {
      throw invalidConfig(`decisionLog.maxRecordBytes must be an integer, got ${describe(option.maxRecordBytes)}`);
    }
    config.max_record_bytes = option.maxRecordBytes;
  }
  const identity = identityOf(decider);
  return {
    write,
    /** Lines a file could not take (the runs went on without them); 0 for `write(line)`. */
    get failedWrites() {
      return sink === null ? 0 : sink.failedWrites;
    },
    config: JSON.stringify(config),
    /** The `policy` member of a `decision` input (with its comma), or ''. */
    policy: () => {
      const text = identity();
      return text === null ? '' : `,"policy":${text}`;
    },
  };
}

/** The run configuration text with the `decision_log` member added. */
export function withDecisionLog(configText, log) {
  if (log === null) return configText;
  const inner = configText.trim().slice(1, -1).trim();
  return `{${inner}${inner === '' ? '' : ','}"decision_log":${log.config}}`;
}
