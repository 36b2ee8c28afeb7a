-- Sign-in attempts still being checked. The failed-sign-in limits count them
-- with the recorded failures, so parallel guesses cannot all pass the check
-- before any of them has failed. Operational state: a row lives for the length
-- of one request (a crashed request's row stops counting after 30 seconds).
CREATE TABLE sign_in_attempts (
    id         uuid NOT NULL,
    scope_key  text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, scope_key)
);
CREATE INDEX sign_in_attempts_scope ON sign_in_attempts (scope_key, started_at);

GRANT SELECT, INSERT, DELETE ON sign_in_attempts TO tether_service;
