-- What the Firebase-compatible surface needs.
--
-- Firebase ID tokens are RS256: signing_keys holds a ring of RS256 keys beside the
-- ES256 ring of access tokens, each rotated on its own (SigningKeyStore filters by
-- algorithm).
ALTER TABLE signing_keys DROP CONSTRAINT signing_keys_algorithm_check;
ALTER TABLE signing_keys ADD CONSTRAINT signing_keys_algorithm_check CHECK (algorithm IN ('ES256', 'RS256'));

-- Developer claims set through the admin API (Firebase's customAttributes), a JSON
-- object of at most 1000 characters, projected from CustomClaimsSet events. Sealed
-- in the log like personal data, and gone from here when the user is erased.
ALTER TABLE users ADD COLUMN custom_claims text;
