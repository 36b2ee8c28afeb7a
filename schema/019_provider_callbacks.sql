-- What providers tell Tether outside a sign-in. Apple's server-to-server notifications
-- are recorded by a key per delivery (its jti, else its event time and subject), so a
-- repeat changes nothing; Facebook's data deletion requests are tracked by the
-- confirmation code Facebook shows the person. Neither keeps the provider's user id in
-- clear: a hash is enough to answer a status.
CREATE TABLE provider_notifications (
    provider     text NOT NULL,
    dedup_key    text NOT NULL,
    kind         text NOT NULL,
    outcome      text NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, dedup_key)
);

CREATE TABLE provider_deletion_requests (
    confirmation_code text PRIMARY KEY,
    provider          text NOT NULL,
    uid_hash          text NOT NULL,
    status            text NOT NULL CHECK (status IN ('completed', 'no_user')),
    requested_at      timestamptz NOT NULL DEFAULT now()
);

GRANT SELECT, INSERT ON provider_notifications TO tether_service;
GRANT SELECT, INSERT ON provider_deletion_requests TO tether_service;
