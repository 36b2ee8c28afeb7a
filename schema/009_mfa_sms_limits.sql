-- SMS codes are limited per phone number as well as per user. The count is
-- operational state, not a read model: a row per code sent, keyed by a hash of
-- the number, kept only as long as the limit's window (the log seals numbers
-- with their user's key, so it cannot be counted by number).
CREATE TABLE sms_sends (
    number_hash text,
    sent_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sms_sends_number ON sms_sends (number_hash, sent_at);

GRANT SELECT, INSERT, DELETE ON sms_sends TO tether_service;

-- The same rows count a user's sends, so parallel requests of one user are held
-- to the limit before any code leaves (the user's events record sends only after).
ALTER TABLE sms_sends ADD COLUMN user_id uuid;
CREATE INDEX sms_sends_user ON sms_sends (user_id, sent_at);
