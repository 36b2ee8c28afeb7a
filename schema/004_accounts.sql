-- Read models of the accounts domain, projected from user-<id> streams in the
-- same transaction as the append. Every row can be rebuilt from the events.

CREATE TABLE users (
    id               uuid PRIMARY KEY,
    email            text,
    email_normalized text,
    email_verified   boolean NOT NULL DEFAULT false,
    display_name     text,
    photo_url        text,
    disabled         boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL,
    last_sign_in_at  timestamptz,
    valid_since      timestamptz,
    version          integer NOT NULL
);
CREATE INDEX users_email_normalized ON users (email_normalized);

CREATE TABLE identities (
    user_id        uuid NOT NULL REFERENCES users (id),
    provider       text NOT NULL,
    provider_uid   text NOT NULL,
    email          text,
    email_verified boolean NOT NULL DEFAULT false,
    display_name   text,
    photo_url      text,
    password_hash  text,
    linked_at      timestamptz NOT NULL,
    CONSTRAINT identities_user_provider_key UNIQUE (user_id, provider),
    CONSTRAINT identities_provider_uid_key UNIQUE (provider, provider_uid)
);

CREATE TABLE sessions (
    id                 uuid PRIMARY KEY,
    user_id            uuid NOT NULL REFERENCES users (id),
    refresh_token_hash text NOT NULL,
    generation         integer NOT NULL DEFAULT 0,
    jkt                text,
    amr                jsonb NOT NULL DEFAULT '[]',
    auth_time          timestamptz NOT NULL,
    started_at         timestamptz NOT NULL,
    last_refreshed_at  timestamptz,
    ended_at           timestamptz,
    end_reason         text
);
CREATE INDEX sessions_user ON sessions (user_id);

-- Every refresh token hash ever issued, so that a superseded one is recognised as reuse.
CREATE TABLE refresh_tokens (
    token_hash text PRIMARY KEY,
    session_id uuid NOT NULL REFERENCES sessions (id),
    generation integer NOT NULL
);

GRANT SELECT, INSERT, UPDATE, DELETE ON users, identities, sessions, refresh_tokens TO tether_service;
