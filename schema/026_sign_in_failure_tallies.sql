-- Refused sign-ins that concern no known account (forged or garbled tokens, guesses at emails
-- nobody holds) and throttled ones, counted per minute, provider and reason instead of being
-- appended to the log one event each: anyone can send those for free, and the log is forever.
-- The rows of a minute are bounded by providers times reasons, whatever the volume; once the
-- minute has closed, one `SignInFailuresCounted` event records them and the rows are deleted.
-- Refusals of a known account stay events in that account's history (bounded by its limit).
CREATE TABLE sign_in_failure_tallies (
    minute   timestamptz NOT NULL,
    kind     text NOT NULL CHECK (kind IN ('failed', 'throttled')),
    provider text NOT NULL,
    -- the problem code answered for `failed`; the limit's scope (client address, account) for `throttled`
    detail   text NOT NULL,
    count    bigint NOT NULL,
    PRIMARY KEY (minute, kind, provider, detail)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON sign_in_failure_tallies TO tether_service;
