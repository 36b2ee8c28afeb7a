-- `tether replay` loads most of the log in bulk (final rows computed user by user and written
-- with COPY), then catches up event by event: each run records how many events its bulk phase
-- loaded and how long that phase took, so /metrics and the final line can give both rates.
ALTER TABLE projection_replays
    ADD COLUMN bulk_events  bigint NOT NULL DEFAULT 0 CHECK (bulk_events >= 0),
    ADD COLUMN bulk_seconds double precision NOT NULL DEFAULT 0 CHECK (bulk_seconds >= 0);
