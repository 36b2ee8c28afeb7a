-- Mailed codes (password reset, verification, email change) are limited per
-- address and per user like SMS codes are per number and per user: the same
-- short-lived rows count both, told apart by channel. An address is kept as a
-- hash, and a send to an address that has no account counts too, so that the
-- limit answers the same whether or not someone uses that address.
ALTER TABLE sms_sends RENAME TO code_sends;
ALTER TABLE code_sends RENAME COLUMN number_hash TO address_hash;
ALTER TABLE code_sends ADD COLUMN channel text NOT NULL DEFAULT 'sms' CHECK (channel IN ('sms', 'mail'));
DROP INDEX sms_sends_number;
DROP INDEX sms_sends_user;
CREATE INDEX code_sends_address ON code_sends (channel, address_hash, sent_at);
CREATE INDEX code_sends_user ON code_sends (channel, user_id, sent_at);
