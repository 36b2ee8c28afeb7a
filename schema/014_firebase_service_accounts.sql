-- Service accounts that sign Firebase custom tokens (`tether firebase service-account create`).
-- Only the public half is kept: the private key is printed once, inside the JSON that
-- firebase-admin's credentials.Certificate loads, and never stored.
CREATE TABLE firebase_service_accounts (
    key_id         text PRIMARY KEY,          -- the JSON's private_key_id, and the `kid` of the tokens it signs
    client_email   text NOT NULL UNIQUE,      -- `iss` and `sub` of those tokens
    public_key_pem text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz
);

GRANT SELECT, INSERT, UPDATE ON firebase_service_accounts TO tether_service;
