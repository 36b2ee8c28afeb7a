-- Admin keys of the support and admin API (/v1/admin), projected from the
-- admin-key-<id> streams (AdminKeyCreated, AdminKeyRevoked), so the table can be
-- rebuilt from the log. A key is shown once by `tether admin-keys create`; only
-- its SHA-256 is kept. When a key was last used is read from its stream (every
-- request made with it is an event there), so nothing here changes per request.

CREATE TABLE admin_keys (
    id         uuid PRIMARY KEY,
    name       text,
    role       text NOT NULL CHECK (role IN ('support', 'admin')),
    key_hash   text NOT NULL CHECK (key_hash ~ '^[0-9a-f]{64}$'),
    created_at timestamptz NOT NULL,
    revoked_at timestamptz,
    CONSTRAINT admin_keys_key_hash_key UNIQUE (key_hash)
);

-- The server only reads keys; creating and revoking them is the command line's
-- job, with the database owner's rights.
REVOKE ALL ON admin_keys FROM PUBLIC;
GRANT SELECT ON admin_keys TO tether_service;

-- The support API finds users by any linked identity's email, in any case.
CREATE INDEX identities_email_lower ON identities (lower(email));
