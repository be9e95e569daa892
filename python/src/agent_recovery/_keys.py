"""The store names of the dead-letter queue (docs/runtime.md, "Store keys"),
defined once for the package."""

from typing import Final

#: The append-only stream of dead-letter records.
DEAD_LETTER_STREAM: Final = "agent-recovery/dead-letter"
#: Prefix of the item status keys: `agent-recovery/dead-letter/item/<id>`.
ITEM_PREFIX: Final = "agent-recovery/dead-letter/item/"
#: The count of records replayed successfully or purged.
CLOSED_KEY: Final = "agent-recovery/dead-letter/closed"
