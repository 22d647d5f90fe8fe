-- Upgrade of a keys table created before the ordered insert checked the
-- event before its own by id: the columns recording a key's last two
-- event ids.
ALTER TABLE {{.Keys}}
    ADD COLUMN last_id VARBINARY(144) NULL,
    ADD COLUMN id_seq  BIGINT         NULL,
    ADD COLUMN prev_id VARBINARY(144) NULL;
