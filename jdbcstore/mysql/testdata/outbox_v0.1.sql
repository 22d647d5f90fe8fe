-- Outbox table for MySQL 8 and MariaDB 10.6+ (github.com/outbox-go/outbox/jdbcstore).
-- Times are DATETIME(6) holding UTC wall-clock time (never converted by the
-- session time_zone). payload is JSON: the document itself for payload_kind 0
-- (JSON), a JSON string of the standard base64 of the bytes for payload_kind 1.
-- event_id is VARBINARY(144) (36 characters of up to 4 bytes): ids compare
-- byte for byte, so 'a', 'A' and 'a ' are three ids (utf8mb4_bin pads spaces).
-- status: 0 NEW, 1 DONE, 2 RETRY, 3 DEAD.
-- The index is declared inside CREATE TABLE: MySQL 8 has no
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
    PRIMARY KEY (event_id),
    KEY idx_status_available (status, available_at, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
