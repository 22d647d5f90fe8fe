-- Inbox table for SQLite (github.com/outbox-go/outbox/inbox).
-- Natural key (source, message_id): TEXT compared byte for byte (BINARY
-- collation), so ids and sources are case-sensitive and 'a' <> 'a '.
-- Times are INTEGER Unix microseconds (UTC); payload and hash are BLOBs.
-- status: 0 Seen, 1 Processing, 2 Done, 3 Dead.
-- The partial indexes serve the claim (Processing rows by next attempt) and
-- the cleanup (Done rows by last sighting).
CREATE TABLE IF NOT EXISTS {{.Table}} (
    source          TEXT    NOT NULL CHECK (length(source) BETWEEN 1 AND 255),
    message_id      TEXT    NOT NULL CHECK (length(message_id) BETWEEN 1 AND 255),
    topic           TEXT    NOT NULL CHECK (length(topic) <= 255),
    payload         BLOB    NOT NULL,
    hash            BLOB,
    status          INTEGER NOT NULL,
    attempt         INTEGER NOT NULL DEFAULT 0,
    first_seen_at   INTEGER NOT NULL,
    last_seen_at    INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    due_at          INTEGER,
    locked_by       TEXT,
    locked_until    INTEGER,
    last_error      TEXT,
    PRIMARY KEY (source, message_id)
);

CREATE INDEX IF NOT EXISTS {{.Index "work"}}
    ON {{.Table}} (next_attempt_at) WHERE status = 1;

CREATE INDEX IF NOT EXISTS {{.Index "cleanup"}}
    ON {{.Table}} (last_seen_at) WHERE status = 2;
