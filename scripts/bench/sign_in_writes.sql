-- Baseline (b): the minimum writes of a returning sign-in as one statement: update the
-- user row, append two ~400-byte events to the user's stream, insert a session row.
\set n random(1, 10000)
WITH u AS (
    UPDATE bench.bench_users SET last_sign_in_at = now(), version = version + 2
    WHERE id = md5('user-' || :n)::uuid
    RETURNING id, version
), e AS (
    INSERT INTO bench.bench_events (stream, version, event_id, type, data, user_id)
    SELECT 'user-' || u.id, u.version - 2 + k, gen_random_uuid(), t, '{"outcome":"returning","provider":"apple","sessionId":"C4FE45BE-C793-484C-B38C-9A3F12132D35","amr":["apple"],"clientAddress":"127.0.0.1","userAgent":"TetherBench/1.0 (pgbench baseline)","sealedPersonal":"MXDFc1spzAZsnP9IwPD3f6hue5J2P0Kw4rHyJNR8Fi6r103tsfr5n5zIluVMTcypgRxXYLspfzSRc5/Arxzp4vQ6hgplXKwUh0wabQrFJgMXDFc1spzAZsnP9IwPD3f6hue5J2P0Kw4rHyJNR8Fi6r103tsfr5n5zIluVMTcypgRxXYLspfzSRc5/Arxzp4v"}', u.id
    FROM u, (VALUES (1, 'SignedIn'), (2, 'SessionStarted')) AS kinds (k, t)
)
INSERT INTO bench.bench_sessions (id, user_id, refresh_token_hash, amr, auth_time, started_at)
SELECT gen_random_uuid(), u.id, md5(random()::text) || md5(random()::text), '["apple"]', now(), now()
FROM u;
