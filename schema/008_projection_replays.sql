-- Finished runs of `tether replay`: one row per projection rebuilt and swapped in
-- (mode 'replay') or rebuilt aside and compared with the live tables ('verify').
-- The server exports the latest figures per projection and mode as metrics.

CREATE TABLE projection_replays (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    projection        text NOT NULL,
    mode              text NOT NULL CHECK (mode IN ('replay', 'verify')),
    events            bigint NOT NULL CHECK (events >= 0),
    duration_seconds  double precision NOT NULL CHECK (duration_seconds >= 0),
    events_per_second double precision NOT NULL CHECK (events_per_second >= 0),
    -- Rows where the live tables differed from the log; only a verify counts them.
    drifting_rows     integer CHECK ((mode = 'verify') = (drifting_rows IS NOT NULL)),
    finished_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX projection_replays_latest ON projection_replays (projection, mode, finished_at DESC, id DESC);

REVOKE ALL ON projection_replays FROM PUBLIC;
GRANT SELECT ON projection_replays TO tether_service;
