-- Inbox table for MySQL 8 and MariaDB 10.6+ (github.com/outbox-go/outbox/inbox).
-- source, message_id and topic are VARBINARY(1020) (255 characters of up to
-- 4 bytes): they compare byte for byte, so 'a', 'A' and 'a ' are three
-- values (utf8mb4 collations ignore case or pad spaces). The primary key
-- (source, message_id) is 2,040 bytes, within InnoDB's 3,072.
-- locked_by is VARBINARY(64) for the same reason: the owner fence is exact.
-- Times are DATETIME(6) holding UTC wall-clock time. payload is LONGBLOB
-- (any bytes, no format), hash VARBINARY(1024).
-- status: 0 Seen, 1 Processing, 2 Done, 3 Dead.
-- The indexes are declared inside CREATE TABLE: MySQL 8 has no
-- CREATE INDEX IF NOT EXISTS.
CREATE TABLE IF NOT EXISTS {{.Table}} (
    source          VARBINARY(1020) NOT NULL,
    message_id      VARBINARY(1020) NOT NULL,
    topic           VARBINARY(1020) NOT NULL,
    payload         LONGBLOB        NOT NULL,
    hash            VARBINARY(1024) NULL,
    status          TINYINT         NOT NULL,
    attempt         INT             NOT NULL DEFAULT 0,
    first_seen_at   DATETIME(6)     NOT NULL,
    last_seen_at    DATETIME(6)     NOT NULL,
    next_attempt_at DATETIME(6)     NOT NULL,
    due_at          DATETIME(6)     NULL,
    locked_by       VARBINARY(64)   NULL,
    locked_until    DATETIME(6)     NULL,
    last_error      TEXT            NULL,
    PRIMARY KEY (source, message_id),
    KEY idx_work (status, next_attempt_at),
    KEY idx_cleanup (status, last_seen_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
