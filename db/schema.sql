-- db/schema.sql: the rlgate database, schema version 1.
--
-- rlgate compiles this file in and applies it by itself to a database whose
-- PRAGMA user_version is 0 (a new, empty file), in one BEGIN IMMEDIATE
-- transaction, after checking user_version again under that lock (several
-- processes may create the file together). The last statement sets
-- user_version to 1; a later rlgate raises it when it changes the schema,
-- and refuses a file whose version is newer than it knows.
--
-- Every statement is IF NOT EXISTS, so feeding this file to an existing
-- database by hand (sqlite3 rlgate.db < schema.sql) changes nothing.
--
-- Times are integers: milliseconds since 1970-01-01 00:00:00 UTC. The views
-- below turn them into readable UTC times for the sqlite3 shell; see
-- db/queries.sql for ready queries.

-- The limiter state: one row per (policy, client), never one per window.
-- A new window overwrites the row, so the file grows with the number of
-- active clients, not with time; rows whose expires_ms has passed are as
-- good as absent and rlgate prunes them in batches.
CREATE TABLE IF NOT EXISTS rlg_state (
	policy          TEXT    NOT NULL,  -- [policy NAME] of the config
	client          TEXT    NOT NULL,  -- client key: IP, prefix, key hash
	window_start_ms INTEGER NOT NULL,  -- start of the counted window
	count           INTEGER NOT NULL,  -- requests admitted in that window
	expires_ms      INTEGER NOT NULL,  -- from this instant on: prunable
	PRIMARY KEY (policy, client)
) WITHOUT ROWID;

-- Pruning finds expired rows through this index, without a full scan.
CREATE INDEX IF NOT EXISTS rlg_state_expires ON rlg_state (expires_ms);

-- One row per (policy, client) with readable times (UTC):
--   window_start  start of the counted window
--   resets_at     when the state expires: for the fixed window, the end of
--                 the window, when the count starts again from 0
--   reset_in_s    whole seconds from now until then (0 once passed)
--   expired       1 when the row is stale (its count no longer applies)
-- Example: SELECT * FROM clients WHERE NOT expired ORDER BY count DESC;
CREATE VIEW IF NOT EXISTS clients AS
WITH now (ms) AS (
	SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
)
SELECT
	policy,
	client,
	count,
	datetime(window_start_ms / 1000, 'unixepoch') AS window_start,
	datetime(expires_ms / 1000, 'unixepoch')      AS resets_at,
	max(0, (expires_ms - now.ms + 999) / 1000)    AS reset_in_s,
	expires_ms <= now.ms                          AS expired
FROM rlg_state, now;

-- One row per policy:
--   active_clients  clients whose state has not expired
--   total_count     requests admitted in their current windows
--   expired_rows    stale rows that the next prune deletes
CREATE VIEW IF NOT EXISTS summary AS
WITH now (ms) AS (
	SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
)
SELECT
	policy,
	sum(expires_ms > now.ms) AS active_clients,
	coalesce(sum(CASE WHEN expires_ms > now.ms THEN count END), 0)
	    AS total_count,
	sum(expires_ms <= now.ms) AS expired_rows
FROM rlg_state, now
GROUP BY policy;

PRAGMA user_version = 1;
