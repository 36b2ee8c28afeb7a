-- Tether's own access-token signing keys, and the DPoP proofs already accepted.
--
-- signing_keys: one ES256 key signs at a time. A successor is inserted ahead of
-- its activated_at, so that every cache of /.well-known/jwks.json has it before
-- the first token it signs; its predecessor gets a retired_at far enough after
-- that for every token it signed to have expired. retired_at is therefore the
-- moment a key stops being published, and may lie in the future. Once passed,
-- the private half is erased: nothing may sign with a retired key again.
--
-- The private key is stored as PEM in the clear for now; encrypting it under a
-- key held outside the database is a later step.

CREATE TABLE signing_keys (
    kid             text PRIMARY KEY,               -- RFC 7638 thumbprint of the public key
    algorithm       text NOT NULL CHECK (algorithm = 'ES256'),
    private_key_pem text,                           -- NULL once retired
    public_jwk      jsonb NOT NULL,
    created_at      timestamptz NOT NULL,
    activated_at    timestamptz NOT NULL,           -- first moment the key may sign
    retired_at      timestamptz,                    -- first moment the key is no longer published
    CHECK (retired_at IS NULL OR retired_at > activated_at),
    CHECK (private_key_pem IS NOT NULL OR retired_at IS NOT NULL)
);

REVOKE ALL ON signing_keys FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON signing_keys TO tether_service;

-- DPoP proofs (RFC 9449 §11.1) seen within their acceptance window. proof_hash
-- is the verifier's identifier: SHA-256 over the proof key's thumbprint and the
-- jti, so the same jti under two keys are two proofs, and no jti is stored raw.

CREATE TABLE dpop_proofs (
    proof_hash text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

-- The periodic purge deletes by expiry.
CREATE INDEX dpop_proofs_expires_at ON dpop_proofs (expires_at);

REVOKE ALL ON dpop_proofs FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON dpop_proofs TO tether_service;
