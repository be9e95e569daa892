// The store names of the dead-letter queue (docs/runtime.md, "Store keys"),
// defined once for the package.

/** The append-only stream of dead-letter records. */
export const DEAD_LETTER_STREAM = 'agent-recovery/dead-letter';
/** The item key prefix: `agent-recovery/dead-letter/item/<id>`. */
export const ITEM_PREFIX = 'agent-recovery/dead-letter/item/';
/** The count of records replayed successfully or purged. */
export const CLOSED_KEY = 'agent-recovery/dead-letter/closed';
