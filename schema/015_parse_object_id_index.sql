-- The Parse objectId (012) needs no stored column: an index on its expression finds a
-- user by it, and a sign-in's update of the user's row no longer recomputes it (a
-- stored generated column is recomputed on every UPDATE, HOT ones included).
DROP INDEX users_parse_object_id;
ALTER TABLE users DROP COLUMN parse_object_id;
CREATE UNIQUE INDEX users_parse_object_id
    ON users ((substr(translate(encode(sha256(uuid_send(id)), 'base64'), '+/=', ''), 1, 10)));
