-- Every sign-in inserts a session and its first refresh token, and every refresh inserts a refresh
-- token. Their foreign keys (sessions to users, refresh tokens to sessions) made PostgreSQL run a
-- `SELECT … FOR KEY SHARE` of the referenced row for each of those inserts: measured under sign-in
-- load, about a third of the PostgreSQL time of a sign-in's writes (`pg_stat_statements`, 439 → 284 µs
-- a statement on a slow machine).
--
-- These tables are read models: only the account projection writes them, in the transaction of the
-- events they project, under the user's lock, and nothing deletes from them. Their integrity is the
-- log's: a row no event accounts for is drift, which `tether replay --verify` reports. The rarer writes
-- (identities, second factors) keep their foreign keys.
ALTER TABLE refresh_tokens DROP CONSTRAINT refresh_tokens_session_id_fkey;
ALTER TABLE sessions DROP CONSTRAINT sessions_user_id_fkey;
