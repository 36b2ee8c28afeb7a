-- Scratch tables for the pgbench baselines of scripts/bench.sh, in a schema of their own
-- so that Tether's tables are untouched. Each copies the shape of Tether's table as the
-- migrations made it (columns, defaults, checks, identity, primary key, unique constraints
-- and indexes). LIKE copies neither triggers nor foreign keys: the log's trigger fires only
-- on UPDATE, DELETE and TRUNCATE of events, and sessions' foreign key to users is left out.
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;
CREATE TABLE bench.bench_events (LIKE public.events INCLUDING ALL);
CREATE TABLE bench.bench_users (LIKE public.users INCLUDING ALL);
CREATE TABLE bench.bench_sessions (LIKE public.sessions INCLUDING ALL);
-- 10,000 users, each addressed by pgbench as md5('user-' || n)::uuid.
INSERT INTO bench.bench_users (id, email, email_normalized, email_verified, created_at, version)
SELECT md5('user-' || n)::uuid, 'user' || n || '@bench.example', 'user' || n || '@bench.example', true, now(), 1
FROM generate_series(1, 10000) AS n;
ANALYZE bench.bench_users;
