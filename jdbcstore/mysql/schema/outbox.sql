-- Outbox table for MySQL 8 and MariaDB 10.6+ (github.com/outbox-go/outbox/jdbcstore/mysql).
-- Times are DATETIME(6) holding UTC wall-clock time (never converted by the
-- session time_zone). payload is JSON: the document itself for payload_kind 0
-- (JSON), a JSON string of the standard base64 of the bytes for payload_kind 1.
-- event_id is VARBINARY(144) (36 characters of up to 4 bytes): ids compare
-- byte for byte, so 'a', 'A' and 'a ' are three ids (utf8mb4_bin pads spaces).
-- status: 0 NEW, 1 DONE, 2 RETRY, 3 DEAD.
-- Ordered events carry order_key (255 characters of up to 4 bytes, compared
-- byte for byte) and order_seq (1, 2, ... per key, no gaps, taken from the
-- keys table under its row lock). order_skip 1 means a DEAD event releases
-- its key. The keys table also records the id of the key's last event
-- (last_id, at position id_seq) and of the event before it (prev_id), so an
-- ordered insert checks the event before its own by primary key: a read by
-- position in idx_order would lock the gap before that entry until the
-- publishing transaction ends (REPEATABLE READ), holding up other inserts.
-- A keys table created by an earlier release lacks them: ApplySchema adds
-- them (keys_upgrade.sql), and until then the check reads by position. Unordered events leave order_key NULL (a unique key admits many).
-- idx_status_done serves the retention purge (finished rows by status and
-- done_at, one index range per batch), the recent activity (counts of index
-- ranges) and the dead letters by type (event_type read from the index, not
-- from one row per DEAD event). A table created by an earlier release lacks
-- it, or has it without event_type, and keeps working, the purge then
-- scanning: add it (or replace it) online with ALTER TABLE {{.Table}}
-- [DROP KEY idx_status_done,] ADD KEY idx_status_done (status, done_at,
-- event_type), ALGORITHM=INPLACE, LOCK=NONE
-- The indexes are declared inside CREATE TABLE: MySQL 8 has no
-- CREATE INDEX IF NOT EXISTS, and index names are per table.
CREATE TABLE IF NOT EXISTS {{.Table}} (
    event_id       VARBINARY(144) NOT NULL,
    event_type     VARCHAR(128)   NOT NULL,
    aggregate_type VARCHAR(64)    NULL,
    aggregate_id   VARCHAR(128)   NULL,
    tenant_id      VARCHAR(64)    NULL,
    occurred_at    DATETIME(6)    NOT NULL,
    payload        JSON           NOT NULL,
    payload_kind   TINYINT        NOT NULL DEFAULT 0,
    headers        JSON           NULL,
    status         TINYINT        NOT NULL,
    attempts       INT            NOT NULL DEFAULT 0,
    available_at   DATETIME(6)    NOT NULL,
    created_at     DATETIME(6)    NOT NULL,
    done_at        DATETIME(6)    NULL,
    last_error     TEXT           NULL,
    locked_by      VARCHAR(64)    NULL,
    locked_until   DATETIME(6)    NULL,
    order_key      VARBINARY(1020) NULL,
    order_seq      BIGINT         NULL,
    order_skip     TINYINT        NOT NULL DEFAULT 0,
    PRIMARY KEY (event_id),
    KEY idx_status_available (status, available_at, created_at),
    KEY idx_status_done (status, done_at, event_type),
    UNIQUE KEY idx_order (order_key, order_seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {{.Keys}} (
    order_key VARBINARY(1020) NOT NULL,
    last_seq  BIGINT          NOT NULL,
    last_id   VARBINARY(144)  NULL,
    id_seq    BIGINT          NULL,
    prev_id   VARBINARY(144)  NULL,
    PRIMARY KEY (order_key)
) ENGINE=InnoDB;
