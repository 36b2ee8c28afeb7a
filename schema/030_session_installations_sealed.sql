-- A session's app installation (Parse's X-Parse-Installation-Id, an identifier of the person's device) was kept
-- in clear in `sessions`, where erasing the user left it, and a replay wrote it back. A session now keeps it
-- sealed with its user's key, in its `SessionStarted` event's personal part; the Parse surface reads it from the
-- user's state, which is built from the opened events. Nothing reads the column any more.
ALTER TABLE sessions DROP COLUMN installation_id;
