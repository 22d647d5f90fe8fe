-- Inbox table for PostgreSQL 13+ (github.com/outbox-go/outbox/inbox).
-- Natural key (source, message_id): text in the "C" collation, compared
-- byte for byte, so ids and sources are case-sensitive and 'a' <> 'a '.
-- Times are timestamptz; payload and hash are bytea (any bytes).
-- status: 0 Seen, 1 Processing, 2 Done, 3 Dead.
-- The partial indexes serve the claim (Processing rows by next attempt) and
-- the cleanup (Done rows by last sighting).
CREATE TABLE IF NOT EXISTS {{.Table}} (
    source          VARCHAR(255) COLLATE "C" NOT NULL,
    message_id      VARCHAR(255) COLLATE "C" NOT NULL,
    topic           VARCHAR(255) COLLATE "C" NOT NULL,
    payload         BYTEA        NOT NULL,
    hash            BYTEA,
    status          SMALLINT     NOT NULL,
    attempt         INTEGER      NOT NULL DEFAULT 0,
    first_seen_at   TIMESTAMPTZ  NOT NULL,
    last_seen_at    TIMESTAMPTZ  NOT NULL,
    next_attempt_at TIMESTAMPTZ  NOT NULL,
    due_at          TIMESTAMPTZ,
    locked_by       VARCHAR(64)  COLLATE "C",
    locked_until    TIMESTAMPTZ,
    last_error      TEXT,
    PRIMARY KEY (source, message_id)
);

CREATE INDEX IF NOT EXISTS {{.Index "work"}}
    ON {{.Table}} (next_attempt_at) WHERE status = 1;

CREATE INDEX IF NOT EXISTS {{.Index "cleanup"}}
    ON {{.Table}} (last_seen_at) WHERE status = 2;
