-- Personal-data keys are stored wrapped with the master key (TETHER_MASTER_KEY_FILE):
-- 'TMK1', the master key's id (8 bytes), then the AES-256-GCM nonce (12), the sealed
-- key (32) and the tag (16): 72 bytes. Keys stored before wrapping keep their 32 bytes
-- until `tether keys rotate-master` wraps them.
ALTER TABLE personal_data_keys DROP CONSTRAINT personal_data_keys_key_check;
ALTER TABLE personal_data_keys ADD CONSTRAINT personal_data_keys_key_check CHECK (
    key IS NULL OR octet_length(key) = 32 OR (octet_length(key) = 72 AND substring(key FROM 1 FOR 4) = '\x544d4b31'::bytea)
);
