-- What the sign-in limits count, per key (a client address, or a hash of a
-- password account's email): failures and sign-ups for the window, and password
-- attempts still being checked, so parallel guesses cannot all pass the check
-- before any of them has failed (a crashed request's attempt stops counting after
-- 30 seconds). Operational state, swept after the window: the events that record
-- failures for support staff are sealed like any personal data, so the limits do
-- not count them.
CREATE TABLE sign_in_attempts (
    id         uuid NOT NULL,
    scope_key  text NOT NULL,
    kind       text NOT NULL DEFAULT 'attempt' CHECK (kind IN ('attempt', 'failure', 'sign_up')),
    started_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, scope_key)
);
CREATE INDEX sign_in_attempts_scope ON sign_in_attempts (scope_key, started_at);

GRANT SELECT, INSERT, DELETE ON sign_in_attempts TO tether_service;
