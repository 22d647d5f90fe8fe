-- Outbox table for PostgreSQL 13+ (github.com/outbox-go/outbox/jdbcstore/postgres).
-- Times are timestamptz (instants, microsecond precision). payload is jsonb:
-- the document itself for payload_kind 0 (JSON; jsonb keeps the value, not
-- the text: key order and whitespace are normalized), a JSON string of the
-- standard base64 of the bytes for payload_kind 1 (byte-exact).
-- Text keys use the "C" collation: ids compare and sort byte for byte, so
-- 'a', 'A' and 'a ' are three ids, in the order Go sorts them.
-- status: 0 NEW, 1 DONE, 2 RETRY, 3 DEAD.
-- Ordered events carry order_key and order_seq (1, 2, ... per key, no gaps,
-- taken from the keys table under its row lock). order_skip 1 means a DEAD
-- event releases its key. Unordered events leave order_key NULL.
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
    locked_until   TIMESTAMPTZ,
    order_key      VARCHAR(255) COLLATE "C",
    order_seq      BIGINT,
    order_skip     SMALLINT     NOT NULL DEFAULT 0
);

CREATE INDEX IF NOT EXISTS {{.Index "pending"}}
    ON {{.Table}} (available_at, created_at, event_id) WHERE status IN (0, 2);

-- Retention and dead-letter operations scan by status.
CREATE INDEX IF NOT EXISTS {{.Index "status_done"}}
    ON {{.Table}} (status, done_at);

-- The dead letters in id order (outboxctl dead list, the dashboard), with
-- their types (dead letters by type, filtered lists): only DEAD rows, so
-- publishing and DONE writes never touch it.
CREATE INDEX IF NOT EXISTS {{.Index "dead"}}
    ON {{.Table}} (event_id, event_type) WHERE status = 3;

CREATE UNIQUE INDEX IF NOT EXISTS {{.Index "order"}}
    ON {{.Table}} (order_key, order_seq) WHERE order_key IS NOT NULL;

CREATE TABLE IF NOT EXISTS {{.Keys}} (
    order_key VARCHAR(255) COLLATE "C" NOT NULL PRIMARY KEY,
    last_seq  BIGINT NOT NULL
);
