-- Stored answers for Idempotency-Key retries.

-- The first answer to a state-changing request that carried an Idempotency-Key.
-- A retry with the same key (same caller, method and path) gets this answer back
-- and changes nothing. `request_hash` tells a retry from a different request that
-- reuses the key. A row without `status` is a request still being answered.
-- `body` is sealed with a key derived from the request itself (answers carry
-- tokens, and only hashes of session secrets may rest in the database).
-- Rows are operational state, not a read model: they expire after a day.
CREATE TABLE idempotent_responses (
    scope        text PRIMARY KEY,
    request_hash text NOT NULL,
    status       integer,
    content_type text,
    -- Headers a retry must see again (Retry-After, WWW-Authenticate, Location).
    headers      jsonb,
    body         bytea,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idempotent_responses_created_at ON idempotent_responses (created_at);

GRANT SELECT, INSERT, UPDATE, DELETE ON idempotent_responses TO tether_service;
