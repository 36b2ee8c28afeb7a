-- Crypto-shredding: the personal part of every event about a user is sealed
-- (AES-256-GCM) with that user's own key. Erasing a user destroys the key (the
-- row stays, without it, so no new key is ever made for them): the log stays
-- append-only, and what it holds about them can no longer be read.

CREATE TABLE personal_data_keys (
    user_id      uuid PRIMARY KEY,
    key          bytea CHECK (key IS NULL OR octet_length(key) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    destroyed_at timestamptz,
    CHECK ((key IS NULL) = (destroyed_at IS NOT NULL))
);

GRANT SELECT, INSERT, UPDATE ON personal_data_keys TO tether_service;

-- When a user was erased (their row stays, without personal data, so ids keep resolving).
ALTER TABLE users ADD COLUMN erased_at timestamptz;
