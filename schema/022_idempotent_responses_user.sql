-- A kept answer of a signed-in caller's request names the caller's user, so erasing the
-- user drops their answers at once instead of a day later. (Answers to sign-ins, made
-- before anyone is signed in, name no one; they are sealed by the request that made them
-- and expire within a day.)
ALTER TABLE idempotent_responses ADD COLUMN user_id uuid;
CREATE INDEX idempotent_responses_user ON idempotent_responses (user_id) WHERE user_id IS NOT NULL;
