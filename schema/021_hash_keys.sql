-- Keys of keyed hashes (HMAC-SHA256): recovery codes are stored as HMACs under a key of
-- their own, wrapped with the master key like every stored key, so a dump of the log
-- cannot be searched for the 50 bits of a recovery code offline. Made on first use.
CREATE TABLE hash_keys (
    name        text PRIMARY KEY,
    key         text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON hash_keys TO tether_service;
