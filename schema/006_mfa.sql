-- Read models of multi-factor authentication, projected from user-<id> streams
-- in the same transaction as the append, like the account tables.

-- Enrolled second factors, as support staff and User.mfa show them. A factor is
-- usable once `confirmed_at` is set. Codes are checked against the user's events
-- (the TOTP secret and the phone number sit, sealed, in the enrolment event), so
-- no secret, number or code hash is copied here.
CREATE TABLE mfa_factors (
    id             uuid PRIMARY KEY,
    user_id        uuid NOT NULL REFERENCES users (id),
    type           text NOT NULL CHECK (type IN ('totp', 'phone')),
    display_name   text,
    phone_hint     text,
    enrolled_at    timestamptz NOT NULL,
    confirmed_at   timestamptz,
    -- The last TOTP time step accepted (a code of that step or earlier is refused).
    last_used_step bigint
);
CREATE INDEX mfa_factors_user ON mfa_factors (user_id);

-- Recovery codes, as SHA-256 hashes; each works once.
CREATE TABLE mfa_recovery_codes (
    user_id    uuid NOT NULL REFERENCES users (id),
    code_hash  text NOT NULL,
    issued_at  timestamptz NOT NULL,
    used_at    timestamptz,
    PRIMARY KEY (user_id, code_hash)
);

-- Second-factor challenges: one per mfaPendingCredential.
CREATE TABLE mfa_challenges (
    id              uuid PRIMARY KEY,
    user_id         uuid NOT NULL REFERENCES users (id),
    first_factor    text NOT NULL,
    amr             jsonb NOT NULL DEFAULT '[]',
    expires_at      timestamptz NOT NULL,
    -- The phone factor the last SMS code went to, and until when that code works.
    factor_id       uuid,
    code_expires_at timestamptz,
    attempts        integer NOT NULL DEFAULT 0,
    issued_at       timestamptz NOT NULL,
    ended_at        timestamptz,
    end_reason      text
);
CREATE INDEX mfa_challenges_user ON mfa_challenges (user_id);

GRANT SELECT, INSERT, UPDATE, DELETE ON mfa_factors, mfa_recovery_codes, mfa_challenges TO tether_service;
