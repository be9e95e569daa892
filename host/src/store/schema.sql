-- The agent-recovery store, schema version 1.
-- One file is shared by the Rust, Python and Node stores: each embeds this
-- exact text and runs it, in one BEGIN IMMEDIATE transaction, on a file that
-- has no tables yet. A file is ours when PRAGMA application_id = 1095914324
-- ('ARST'), and PRAGMA user_version is its schema version. Times are Unix ms.

-- Store-wide counters: 'revision' is the last version issued.
CREATE TABLE ar_meta (
    name  TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO ar_meta (name, value) VALUES ('revision', 0);

-- Entries: one row per key. A row is live while expires_at_ms IS NULL or
-- now_ms < expires_at_ms (now_ms passed in by the caller).
CREATE TABLE ar_entries (
    key           TEXT PRIMARY KEY NOT NULL,
    value         TEXT NOT NULL,
    version       INTEGER NOT NULL CHECK (version >= 1),
    expires_at_ms INTEGER,
    updated_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX ar_entries_expiry ON ar_entries (expires_at_ms)
    WHERE expires_at_ms IS NOT NULL;

-- Streams: append-only records, numbered from 1 per stream.
CREATE TABLE ar_records (
    stream         TEXT NOT NULL,
    seq            INTEGER NOT NULL CHECK (seq >= 1),
    record         TEXT NOT NULL,
    appended_at_ms INTEGER NOT NULL,
    PRIMARY KEY (stream, seq)
) WITHOUT ROWID;

PRAGMA application_id = 1095914324;
PRAGMA user_version = 1;
