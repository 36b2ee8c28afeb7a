-- What the Parse-compatible surface needs from the read models.
--
-- Sessions record the kind of secret they hold (a Parse `r:` token does not rotate
-- and is never refreshed), the app installation they were opened for (a new session
-- of an installation ends the user's earlier ones), and when a secret that does not
-- rotate stops working. All three come from the `SessionStarted` event.
ALTER TABLE sessions
    ADD COLUMN secret_kind     text NOT NULL DEFAULT 'access_and_refresh_tokens',
    ADD COLUMN installation_id text,
    ADD COLUMN expires_at      timestamptz;

-- A user's Parse `objectId`: 10 characters of [A-Za-z0-9], derived from the user's id
-- (the first ten letters and digits of the base64 of SHA-256 over the uuid's 16 bytes),
-- so that every surface names the same user and nothing new is stored. Tether computes
-- the same value in Swift for its answers; this column finds the user by it.
ALTER TABLE users ADD COLUMN parse_object_id text
    GENERATED ALWAYS AS (substr(translate(encode(sha256(uuid_send(id)), 'base64'), '+/=', ''), 1, 10)) STORED;
CREATE UNIQUE INDEX users_parse_object_id ON users (parse_object_id);

-- When a session whose secret does not rotate (a Parse token) was last used, noted at
-- most once an hour, so that `tether sweep anonymous` does not erase an anonymous user
-- who is still using the app. Operational state beside the read models: not an event,
-- not rebuilt by replay (no foreign key, since replay swaps the sessions table).
CREATE TABLE session_activity (
    session_id   uuid PRIMARY KEY,
    last_used_at timestamptz NOT NULL
);

GRANT SELECT, INSERT, UPDATE, DELETE ON session_activity TO tether_service;
