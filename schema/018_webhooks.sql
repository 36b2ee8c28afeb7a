-- Webhook subscriptions: each is a reader of the log with its own durable position
-- (cursor_tx, cursor_position: the last event it has delivered or passed over), moved
-- only after the receiver answered 2xx. Delivery is at least once, in log order. A
-- lease (lease_owner, lease_until) lets several Tether instances share the work
-- without delivering an event twice: only the holder of a live lease delivers.
-- This is operational configuration, not a read model: replay does not touch it.
CREATE TABLE webhook_subscriptions (
    id                    uuid PRIMARY KEY,
    url                   text NOT NULL,
    -- Public event types or prefixes ending in '*' (`user.*`, `*`).
    event_types           text[] NOT NULL,
    -- Whether deliveries carry personal members (addresses, names, uids).
    personal              boolean NOT NULL DEFAULT true,
    secret                text NOT NULL,
    -- After a rotation the old secret signs too until previous_secret_until.
    previous_secret       text,
    previous_secret_until timestamptz,
    status                text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled', 'failing')),
    status_reason         text,
    cursor_tx             xid8 NOT NULL,
    cursor_position       bigint NOT NULL,
    -- Failed attempts at the event after the cursor, and when the first of them was.
    attempts              integer NOT NULL DEFAULT 0,
    failing_since         timestamptz,
    next_attempt_at       timestamptz NOT NULL DEFAULT now(),
    lease_owner           uuid,
    lease_until           timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_subscriptions_due ON webhook_subscriptions (next_attempt_at) WHERE status = 'active';

-- Every delivery attempt: what was sent, how the receiver answered, how long it took.
CREATE TABLE webhook_deliveries (
    id              bigserial PRIMARY KEY,
    subscription_id uuid NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    event_id        text NOT NULL,
    event_type      text NOT NULL,
    event_position  bigint NOT NULL,
    attempt         integer NOT NULL,
    status          integer,
    duration_ms     double precision NOT NULL,
    error           text,
    attempted_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (subscription_id, id DESC);

GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_subscriptions TO tether_service;
GRANT SELECT, INSERT, DELETE ON webhook_deliveries TO tether_service;
GRANT USAGE ON SEQUENCE webhook_deliveries_id_seq TO tether_service;
