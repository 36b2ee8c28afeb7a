-- Whether a provider's relay address still forwards mail (Apple's email-disabled and
-- email-enabled notifications, `ProviderEmailStatusChanged`); NULL until the provider said.
ALTER TABLE identities ADD COLUMN email_forwarding boolean;

-- What the log already says: the latest status of each identity since it was last linked.
UPDATE identities AS i SET email_forwarding = s.forwarding
FROM (
    SELECT DISTINCT ON (e.user_id, e.data->>'provider') e.user_id, e.data->>'provider' AS provider,
           (e.data->>'forwarding')::boolean AS forwarding, e.position
    FROM events e
    WHERE e.type = 'ProviderEmailStatusChanged' AND e.user_id IS NOT NULL
    ORDER BY e.user_id, e.data->>'provider', e.position DESC
) AS s
WHERE i.user_id = s.user_id AND i.provider = s.provider
  AND NOT EXISTS (
      SELECT 1 FROM events l
      WHERE l.user_id = s.user_id AND l.type = 'IdentityLinked' AND l.data->>'provider' = s.provider AND l.position > s.position);
