-- Stored answers for Idempotency-Key retries, and the index that counts failed
-- sign-ins for the abuse limits.

-- The first answer to a state-changing request that carried an Idempotency-Key.
-- A retry with the same key (same caller, method and path) gets this answer back
-- and changes nothing. `request_hash` tells a retry from a different request that
-- reuses the key. Rows are operational state, not a read model: they expire.
CREATE TABLE idempotent_responses (
    scope        text PRIMARY KEY,
    request_hash text NOT NULL,
    status       integer NOT NULL,
    content_type text,
    body         bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idempotent_responses_created_at ON idempotent_responses (created_at);

GRANT SELECT, INSERT, DELETE ON idempotent_responses TO tether_service;

-- Failed sign-ins are events (type SignInFailed, stream sign-in-failures-<hash>);
-- the limits count them per identity (by stream) and per client address.
CREATE INDEX events_sign_in_failures_by_ip ON events ((metadata ->> 'clientIP'), occurred_at)
    WHERE type = 'SignInFailed';
CREATE INDEX events_sign_in_failures_by_stream ON events (stream, occurred_at)
    WHERE type = 'SignInFailed';
