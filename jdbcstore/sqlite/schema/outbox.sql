-- Outbox table for SQLite (github.com/outbox-go/outbox/jdbcstore/sqlite).
-- Times are INTEGER Unix microseconds (UTC); payload holds the raw bytes of
-- either payload kind (payload_kind 0 = JSON, 1 = bytes).
-- status: 0 NEW, 1 DONE, 2 RETRY, 3 DEAD.
-- Ordered events carry order_key and order_seq (1, 2, ... per key, no gaps:
-- the key's last row's plus one, read in the write transaction, which is
-- the only one; SQLite keeps no keys table). order_skip 1 means a DEAD
-- event releases its key. Unordered events leave order_key NULL.
CREATE TABLE IF NOT EXISTS {{.Table}} (
    event_id       TEXT    NOT NULL PRIMARY KEY CHECK (length(event_id) BETWEEN 1 AND 36),
    event_type     TEXT    NOT NULL,
    aggregate_type TEXT,
    aggregate_id   TEXT,
    tenant_id      TEXT,
    occurred_at    INTEGER NOT NULL,
    payload        BLOB    NOT NULL,
    payload_kind   INTEGER NOT NULL DEFAULT 0,
    headers        TEXT,
    status         INTEGER NOT NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    available_at   INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    done_at        INTEGER,
    last_error     TEXT,
    locked_by      TEXT,
    locked_until   INTEGER,
    order_key      TEXT,
    order_seq      INTEGER,
    order_skip     INTEGER NOT NULL DEFAULT 0
);

-- The partial index holds only the pending rows (NEW, RETRY) in claim order:
-- DONE rows, the bulk of a long-lived table, cost it nothing, and the
-- planner sees how few rows it holds (with a status-leading index over every
-- row, ANALYZE tells it a status value matches half the table, and it scans
-- the table to reap or release leases).
CREATE INDEX IF NOT EXISTS {{.Index "pending"}}
    ON {{.Table}} (available_at, created_at, event_id) WHERE status IN (0, 2);

-- The finished rows (DONE, DEAD) by status and done_at: the retention
-- purge walks them by done_at, the recent activity counts them. Partial, so
-- publishing writes nothing into it and a DONE write adds one entry (a
-- (status, done_at) index over every row cost each insert an entry and each
-- DONE write a move: ~8% of an insert, ~12% of a DONE write). Queries state
-- "status IN (1, 3)" for SQLite to use it.
CREATE INDEX IF NOT EXISTS {{.Index "finished"}}
    ON {{.Table}} (status, done_at) WHERE status IN (1, 3);

-- The RETRY rows: with the pending index, which holds NEW and RETRY rows
-- without their status, the counts by status read index entries only
-- (NEW = pending - RETRY), not a row per pending event. Only RETRY rows,
-- so publishing and delivering at the first attempt never touch it.
CREATE INDEX IF NOT EXISTS {{.Index "retry"}}
    ON {{.Table}} (event_id) WHERE status = 2;

-- Tables created before this release have {{.Index "status_done"}}
-- (status, done_at) over every row instead: the finished index replaces
-- it. Dropping it is quick; building the finished index on a table of
-- millions of rows holds the write lock for seconds, once.
DROP INDEX IF EXISTS {{.Index "status_done"}};

-- Tables created before this release also have
-- {{.Index "status_available"}} (status, available_at, created_at): nothing
-- needs it any more, and DROP INDEX removes its cost from every write.

-- The dead letters in id order (outboxctl dead list, the dashboard), with
-- their types (dead letters by type, filtered lists): only DEAD rows, so
-- publishing and DONE writes never touch it.
CREATE INDEX IF NOT EXISTS {{.Index "dead"}}
    ON {{.Table}} (event_id, event_type) WHERE status = 3;

CREATE UNIQUE INDEX IF NOT EXISTS {{.Index "order"}}
    ON {{.Table}} (order_key, order_seq) WHERE order_key IS NOT NULL;

-- An ordered event must come after every event of its key: a position at
-- or below an existing one is refused. The store relies on it to publish
-- from the position it remembers (one index probe here instead of a read
-- from Go); when another process published on the key meanwhile, the
-- insert is refused and the store reads the key's last event instead.
CREATE TRIGGER IF NOT EXISTS {{.Trigger "order_position"}}
    BEFORE INSERT ON {{.Table}} WHEN NEW.order_key IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'outbox: stale order position') WHERE EXISTS (
    SELECT 1 FROM {{.Table}} WHERE order_key = NEW.order_key AND order_seq >= NEW.order_seq); END;
