// agent-recovery for Node: the recovery policy component, run through jco.
//
//   const policy = await Policy.load();
//   const decision = policy.decide({ source: 'http', status: 429 }, { attempt: 1 });
//
// See README.md for the API, the errors and hot swap.

export { Policy, RENDER_FORMATS, MAX_INPUT_BYTES } from './policy.js';
export { IsolatedPolicy, DEFAULT_TIMEOUT_MS, DEFAULT_LOAD_TIMEOUT_MS } from './isolated.js';
export { retry, sleep } from './retry.js';
export { recover, RECOVER_DEFAULTS } from './recover.js';
export { fromResponse, fromError, failureOf } from './observe.js';
export { PolicyError, PolicyRuntimeError, PolicyLoadError, RecoveryError, POLICY_ERROR_KINDS, ERROR_CODES } from './errors.js';
export { GRANTED_IMPORTS, CONTRACT } from './component.js';
export { packDocument, SLOT_MARKER, SLOT_BYTES } from './document.js';
export {
  SignatureError,
  SIGNATURE_PROBLEMS,
  generateSigningKey,
  keyId,
  readSigned,
  sign,
  signaturePath,
  verifySignature,
} from './signing.js';
export {
  MemoryStore,
  SqliteStore,
  StoreError,
  STORE_ERROR_KINDS,
  SCHEMA_SQL,
  SCHEMA_VERSION,
  APPLICATION_ID,
  MAX_NAME_BYTES,
  MAX_VALUE_BYTES,
  MAX_INTEGER,
} from './store.js';
export {
  RedisStore,
  FallbackStore,
  ServerClock,
  openStore,
  parseRedisUrl,
  defaultSpoolPath,
  REDIS_URL_DEFAULTS,
  SPOOL_STREAM,
  SPOOLED_PREFIXES,
} from './store-redis.js';
export { MAX_ID_BYTES } from './step.js';
export { Runtime, Run, SystemClock, VirtualClock, Failed, RawOutcome, Response, RUNTIME_DEFAULTS, Telemetry } from './runtime.js';
export { runScenario, runBatch, outputJson, ScenarioError, SCENARIO_ERROR_KINDS, DEAD_LETTER_STREAM } from './scenario.js';
export {
  DeadLetters,
  DeadLetterError,
  DEAD_LETTER_ERROR_KINDS,
  DEAD_LETTER_STATUSES,
  ITEM_PREFIX,
  CLOSED_KEY,
  LEASE_PREFIX,
  replayKey,
} from './deadletters.js';
export { JOURNAL_PREFIX } from './durable.js';
