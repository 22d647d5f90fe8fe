-- Upgrade of an outbox table created before ordered delivery: the
-- ordering columns and their unique key. The schema's later statement adds
-- the keys table.
ALTER TABLE {{.Table}}
    ADD COLUMN order_key  VARBINARY(1020) NULL,
    ADD COLUMN order_seq  BIGINT          NULL,
    ADD COLUMN order_skip TINYINT         NOT NULL DEFAULT 0,
    ADD UNIQUE KEY idx_order (order_key, order_seq);
