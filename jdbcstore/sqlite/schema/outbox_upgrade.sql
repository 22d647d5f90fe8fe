-- Upgrade of an outbox table created before ordered delivery: the
-- ordering columns. The schema's later statements add the order index.
ALTER TABLE {{.Table}} ADD COLUMN order_key TEXT;
ALTER TABLE {{.Table}} ADD COLUMN order_seq INTEGER;
ALTER TABLE {{.Table}} ADD COLUMN order_skip INTEGER NOT NULL DEFAULT 0;
