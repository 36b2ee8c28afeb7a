-- The append-only event log, and the role the service runs as.
--
-- Tether's server switches every connection to the role tether_service, which
-- may read and insert events but never change or remove them. A trigger makes
-- the log append-only even for the owner, so no code path can rewrite history.

DO $$
BEGIN
    CREATE ROLE tether_service NOLOGIN;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL; -- another database of this cluster made it
END
$$;

DO $$
BEGIN
    EXECUTE format('GRANT tether_service TO %I', current_user);
EXCEPTION
    WHEN insufficient_privilege OR invalid_grant_operation THEN NULL; -- already a member, or superuser
END
$$;

GRANT USAGE ON SCHEMA public TO tether_service;

CREATE TABLE events (
    position    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tx          xid8 NOT NULL DEFAULT pg_current_xact_id(),
    stream      text NOT NULL,
    version     integer NOT NULL CHECK (version > 0),
    event_id    uuid NOT NULL UNIQUE,
    type        text NOT NULL,
    schema      integer NOT NULL DEFAULT 1 CHECK (schema > 0),
    data        jsonb NOT NULL,
    metadata    jsonb NOT NULL DEFAULT '{}',
    user_id     uuid,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (stream, version)
);

-- Readers of the whole log go in (tx, position) order.
CREATE INDEX events_tx_position ON events (tx, position);
CREATE INDEX events_user_id ON events (user_id, position) WHERE user_id IS NOT NULL;

CREATE FUNCTION events_are_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the event log is append-only: % is not allowed on events', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER events_no_update_or_delete
    BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_are_append_only();

CREATE TRIGGER events_no_truncate
    BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_are_append_only();

REVOKE ALL ON events FROM PUBLIC;
REVOKE ALL ON events FROM tether_service;
GRANT SELECT, INSERT ON events TO tether_service;
GRANT SELECT ON schema_migrations TO tether_service;
