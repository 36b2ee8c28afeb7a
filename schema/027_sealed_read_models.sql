-- The read models keep personal data sealed (ReadModelSeal: emails, names, photo URLs, provider
-- uids, password hashes, custom claims and phone hints in users, identities and mfa_factors), under
-- a key in hash_keys wrapped with the master key. Rows written before hold it in clear, and lookups
-- now compare sealed values: they are rebuilt from the log before the server serves again.
--
-- A row here asks for a projection's rebuild. `tether migrate` (and `tether dev`) run it right after
-- the migrations; the swap of any full replay of that projection deletes the row in its own
-- transaction. While one is pending, GET /readyz answers 503 and the server's commands refuse to run.
CREATE TABLE read_model_rebuilds (
    projection   text PRIMARY KEY,
    reason       text NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON read_model_rebuilds TO tether_service;

-- Support search finds users by whole words of their emails, names and provider uids, sealed like the
-- values they come from (ReadModelSeal.searchTerms): an email's words follow users.email, a name's
-- follow users.display_name, and an identity's are set when it is linked.
ALTER TABLE users ADD COLUMN email_terms text[], ADD COLUMN name_terms text[];
ALTER TABLE identities ADD COLUMN search_terms text[];
CREATE INDEX users_email_terms ON users USING gin (email_terms);
CREATE INDEX users_name_terms ON users USING gin (name_terms);
CREATE INDEX identities_search_terms ON identities USING gin (search_terms);

-- Rows written before this migration hold personal data in clear: rebuilt before serving again.
INSERT INTO read_model_rebuilds (projection, reason)
SELECT 'accounts', '027: personal data in the read models is sealed' WHERE EXISTS (SELECT 1 FROM users);
