-- Keys that seal, for a limited time, what the log keeps about no known person: the terms of
-- an admin's user search, and the client address and user agent of a sign-in that failed or was
-- throttled for an account Tether does not know. One key a day and purpose (`name` is
-- `<purpose>/<YYYY-MM-DD>`), wrapped with the master key like every stored key, and readable
-- until `expires_at` (30 days after its day began). After that the key is destroyed (the row
-- stays, without it, so the day's key is never made again) and what it sealed cannot be read.
CREATE TABLE expiring_keys (
    name         text PRIMARY KEY,
    key          bytea CHECK (
        key IS NULL OR octet_length(key) = 32 OR (octet_length(key) = 72 AND substring(key FROM 1 FOR 4) = '\x544d4b31'::bytea)),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    destroyed_at timestamptz,
    CHECK ((key IS NULL) = (destroyed_at IS NOT NULL))
);

GRANT SELECT, INSERT, UPDATE ON expiring_keys TO tether_service;
