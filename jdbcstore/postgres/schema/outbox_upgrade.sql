-- Upgrade of an outbox table created before ordered delivery: the
-- ordering columns. The schema's later statements add the order index and
-- the keys table.
ALTER TABLE {{.Table}}
    ADD COLUMN IF NOT EXISTS order_key  VARCHAR(255) COLLATE "C",
    ADD COLUMN IF NOT EXISTS order_seq  BIGINT,
    ADD COLUMN IF NOT EXISTS order_skip SMALLINT NOT NULL DEFAULT 0;
