-- The rate limits the nodes share (package ratelimit, GCRA): one row per
-- limited key, its theoretical arrival time (the moment its budget is whole
-- again) and its retry budget's. A key names its organization itself
-- (tool:<organization>:<tool>, agent:<organization>:<agent>, key:<key id>);
-- a row holds no data of one, only timestamps. Unlogged: a limit is off the
-- correctness path, so losing the rows to a crash or a failover only gives
-- every key its whole budget back, and no decision waits on the WAL.
CREATE UNLOGGED TABLE rate_limits (
    key       TEXT COLLATE "C" PRIMARY KEY,
    tat       TIMESTAMPTZ NOT NULL,
    retry_tat TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
    -- admitted is the last decision's answer, so the one statement that
    -- decides also says what it decided.
    admitted  BOOLEAN NOT NULL DEFAULT true
);
