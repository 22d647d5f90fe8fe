-- Outbox table for PostgreSQL 13+ (github.com/outbox-go/outbox/jdbcstore/postgres).
-- Times are timestamptz (instants, microsecond precision). payload is jsonb:
-- the document itself for payload_kind 0 (JSON; jsonb keeps the value, not
-- the text: key order and whitespace are normalized), a JSON string of the
-- standard base64 of the bytes for payload_kind 1 (byte-exact).
-- Text keys use the "C" collation: ids compare and sort byte for byte, so
-- 'a', 'A' and 'a ' are three ids, in the order Go sorts them.
-- status: 0 NEW, 1 DONE, 2 RETRY, 3 DEAD.
-- The partial index holds only the pending rows (NEW, RETRY) in claim order:
-- DONE rows, the bulk of the table, cost it nothing.
CREATE TABLE IF NOT EXISTS {{.Table}} (
    event_id       VARCHAR(36)  COLLATE "C" NOT NULL PRIMARY KEY,
    event_type     VARCHAR(128) COLLATE "C" NOT NULL,
    aggregate_type VARCHAR(64)  COLLATE "C",
    aggregate_id   VARCHAR(128) COLLATE "C",
    tenant_id      VARCHAR(64)  COLLATE "C",
    occurred_at    TIMESTAMPTZ  NOT NULL,
    payload        JSONB        NOT NULL,
    payload_kind   SMALLINT     NOT NULL DEFAULT 0,
    headers        JSONB,
    status         SMALLINT     NOT NULL,
    attempts       INTEGER      NOT NULL DEFAULT 0,
    available_at   TIMESTAMPTZ  NOT NULL,
    created_at     TIMESTAMPTZ  NOT NULL,
    done_at        TIMESTAMPTZ,
    last_error     TEXT,
    locked_by      VARCHAR(64)  COLLATE "C",
    locked_until   TIMESTAMPTZ
);

CREATE INDEX IF NOT EXISTS {{.Index "pending"}}
    ON {{.Table}} (available_at, created_at, event_id) WHERE status IN (0, 2);

-- Retention and dead-letter operations scan by status.
CREATE INDEX IF NOT EXISTS {{.Index "status_done"}}
    ON {{.Table}} (status, done_at);
