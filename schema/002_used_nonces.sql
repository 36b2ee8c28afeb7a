-- Sign-in nonces already accepted, so that a captured identity token and raw
-- nonce cannot be presented twice. Only a hash of the raw nonce is stored, and
-- only until the token that carried it expires.

CREATE TABLE used_nonces (
    scope      text NOT NULL,
    nonce_hash text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (scope, nonce_hash)
);

-- The periodic purge deletes by expiry.
CREATE INDEX used_nonces_expires_at ON used_nonces (expires_at);

REVOKE ALL ON used_nonces FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON used_nonces TO tether_service;
