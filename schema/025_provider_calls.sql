-- The outbox of calls to identity providers outside a request: revoking Apple's refresh token or
-- Facebook's permissions when an identity is unlinked or its user erased. A row is written in the
-- transaction of the event that causes the call and worked by a background loop in every
-- instance, under a lease, with backoff; each attempt is also an event in the user's history.
-- `payload` (the token, the client id and the provider's user id) is wrapped with the master key,
-- bound to the row, and dropped once the call is done or abandoned.
CREATE TABLE provider_calls (
    id           uuid PRIMARY KEY,
    user_id      uuid NOT NULL,
    provider     text NOT NULL,
    action       text NOT NULL CHECK (action IN ('apple.revoke', 'facebook.revoke_permissions')),
    payload      text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    due_at       timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    lease_owner  uuid,
    lease_until  timestamptz,
    last_error   text,
    done_at      timestamptz,
    abandoned_at timestamptz
);
CREATE INDEX provider_calls_due ON provider_calls (due_at) WHERE done_at IS NULL AND abandoned_at IS NULL;

GRANT SELECT, INSERT, UPDATE ON provider_calls TO tether_service;
