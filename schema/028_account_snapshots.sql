-- Users' states as of a version of their stream, so that a command on a user whose state the server
-- does not keep in memory (after a restart, or past the cache's budget) decodes only the events after
-- it instead of the whole stream (AccountSnapshot). Derived data, like the read models: deleting rows
-- loses nothing, and the log stays the only truth.
--
-- `state` is sealed with the user's data key, bound to the user, the version and the format: it goes
-- unreadable with the key at erasure, which also deletes the row. A snapshot is used only while the
-- log's event at `version` is the one `tx` wrote (a log put back and written again since does not
-- match), and only by a build that writes the same `format`.
CREATE TABLE account_snapshots (
    user_id  uuid PRIMARY KEY,
    version  integer NOT NULL CHECK (version > 0),
    tx       xid8 NOT NULL,
    format   integer NOT NULL,
    state    bytea NOT NULL,
    taken_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, UPDATE, DELETE ON account_snapshots TO tether_service;
