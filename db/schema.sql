-- db/schema.sql: the rlgate database, schema version 5.
--
-- rlgate compiles this file in and applies it by itself, in one BEGIN
-- IMMEDIATE transaction, after checking PRAGMA user_version again under
-- that lock (several processes may open the file together):
--   0 (a new, empty file): this file as it is;
--   1 (a file of the first rlgate, fixed_window only): first the migration
--     kept in app/store_sqlite_schema.c (ALTER TABLE rlg_state ADD COLUMN for
--     prev_count and tat_us, DROP VIEW clients and summary), then this file,
--     whose IF NOT EXISTS statements add what is new (rlg_log, its trigger,
--     the views anew). The rows are kept.
--   2 (a file of rlgate before max_clients): this file as it is; its IF NOT
--     EXISTS statements add rlg_clients, its triggers, and its counts of
--     the rows already there.
--   3 (a file of rlgate before the overrides): this file as it is; its IF
--     NOT EXISTS statements add rlg_override, rlg_override_version (at a
--     random version) and their triggers.
--   4 (a file of rlgate before the penalty box): first the migration kept
--     in app/store_sqlite_schema.c (ALTER TABLE rlg_state ADD COLUMN for
--     refused, refused_start_ms and ban_until_ms), then this file, whose
--     IF NOT EXISTS statements add the view bans.
-- The last statement sets user_version to 5. rlgate refuses a file whose
-- version is newer than it knows.
--
-- Every statement is IF NOT EXISTS (or OR IGNORE), so feeding this file to
-- a version 5 database by hand (sqlite3 rlgate.db < schema.sql) changes
-- nothing. Never feed it to a version 1 or 4 file: it would set version 5
-- without the new columns and views. Let rlgate migrate that one.
--
-- Times are integers: milliseconds since 1970-01-01 00:00:00 UTC (tat_us:
-- microseconds). The views below turn them into readable UTC times for the
-- sqlite3 shell; see db/queries.sql for ready queries.

-- The limiter state: one row per (policy, client), never one per window.
-- A new window overwrites the row, so the file grows with the number of
-- active clients, not with time; rows whose expires_ms has passed are as
-- good as absent and rlgate prunes them in batches. What the columns hold
-- depends on the policy's algorithm (app/limiter.h):
--   fixed_window    window_start_ms, count
--   sliding_window  window_start_ms, count, prev_count
--   token_bucket    tat_us (the others 0)
--   sliding_log     count and window_start_ms describe the log (rlg_log)
--                   as of the client's last admitted request
-- expires_ms is stored rounded up to a whole second (a window's end is one
-- already): a hot token bucket then rewrites its index entry once a second,
-- not on every request. The last two columns came with version 2; they
-- stay last so that a new file and a migrated one have the same columns
-- in the same order. The three after them came with version 5 (a policy
-- with a ban, the penalty box; 0 without one): refused counts the
-- client's refusals in the window that starts at refused_start_ms, and
-- ban_until_ms is when its ban ends; the view bans shows the bans that
-- hold.
CREATE TABLE IF NOT EXISTS rlg_state (
	-- [policy NAME] of the config
	policy          TEXT    NOT NULL,
	-- client key: IP, prefix, key hash
	client          TEXT    NOT NULL,
	-- start of the counted window; sliding_log: oldest logged request
	window_start_ms INTEGER NOT NULL,
	-- requests admitted in that window; sliding_log: logged requests
	-- inside the window
	count           INTEGER NOT NULL,
	-- from this instant on the row is prunable: as fresh as a new client
	expires_ms      INTEGER NOT NULL,
	-- sliding_window: requests admitted in the window before
	prev_count      INTEGER NOT NULL DEFAULT 0,
	-- token_bucket: theoretical arrival time (GCRA), in microseconds
	tat_us          INTEGER NOT NULL DEFAULT 0,
	-- a policy with a ban: refusals in the window since refused_start_ms
	refused         INTEGER NOT NULL DEFAULT 0,
	refused_start_ms INTEGER NOT NULL DEFAULT 0,
	-- a policy with a ban: every request is refused until then
	ban_until_ms    INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (policy, client)
) WITHOUT ROWID;

-- Pruning finds expired rows through this index, without a full scan.
CREATE INDEX IF NOT EXISTS rlg_state_expires ON rlg_state (expires_ms);

-- The sliding log: one row per admitted request of a sliding_log policy,
-- kept while it is inside the window. Each admitted request deletes its
-- client's rows older than the window, so a client never has more rows
-- than its limit; a client that stops sending keeps its last window's rows
-- until its rlg_state row expires (newest row + window) and is pruned: the
-- trigger below deletes them with it.
--
-- WITHOUT ROWID, clustered on (policy, client, ts_ms): reading one client's
-- window and deleting its oldest rows touch one range of one b-tree, and
-- each row is stored once. Measured with 1,000 IPv4 clients at a limit of
-- 100: 28 bytes a row against 57 for a rowid table with an index on the
-- same columns, and 1.3x to 1.4x the decisions per second.
-- tests/bench/bench_store.c prints the bytes per client and per row. seq
-- tells apart the requests of one client admitted in the same
-- millisecond: 0, 1, 2, ...
CREATE TABLE IF NOT EXISTS rlg_log (
	policy TEXT    NOT NULL,  -- [policy NAME] of the config
	client TEXT    NOT NULL,  -- client key
	ts_ms  INTEGER NOT NULL,  -- when the request was admitted
	seq    INTEGER NOT NULL,  -- 0 for the first request of that millisecond
	PRIMARY KEY (policy, client, ts_ms, seq)
) WITHOUT ROWID;

-- Whoever deletes a state row (rlgate's prune, or an operator resetting a
-- client by hand: db/queries.sql) deletes that client's log with it, so a
-- reset gives a sliding_log client its quota back too, and no log row ever
-- outlives its state row.
CREATE TRIGGER IF NOT EXISTS rlg_state_delete_log
AFTER DELETE ON rlg_state
BEGIN
	DELETE FROM rlg_log WHERE policy = old.policy AND client = old.client;
END;

-- How many clients each policy holds state for: one row per policy, kept
-- exact by the triggers below in the same transaction as the insert or
-- delete (an UPSERT that updates fires no INSERT trigger). rlgate reads it
-- when a request adds a client, to enforce [store] max_clients without
-- counting rows. The INSERT counts the rows of a file that had none of
-- this (a migrated version 2 file); it does nothing to a later one.
CREATE TABLE IF NOT EXISTS rlg_clients (
	policy  TEXT    NOT NULL PRIMARY KEY,  -- [policy NAME] of the config
	clients INTEGER NOT NULL               -- its rows in rlg_state
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS rlg_state_count_insert
AFTER INSERT ON rlg_state
BEGIN
	INSERT INTO rlg_clients (policy, clients) VALUES (new.policy, 1)
	    ON CONFLICT (policy) DO UPDATE SET clients = clients + 1;
END;

CREATE TRIGGER IF NOT EXISTS rlg_state_count_delete
AFTER DELETE ON rlg_state
BEGIN
	UPDATE rlg_clients SET clients = clients - 1 WHERE policy = old.policy;
END;

INSERT OR IGNORE INTO rlg_clients (policy, clients)
	SELECT policy, count(*) FROM rlg_state GROUP BY policy;

-- One row per (policy, client) with readable times (UTC):
--   policy, client, count   as in rlg_state
--   window_start  start of the counted window (sliding_log: the oldest
--                 logged request; NULL for a token bucket, which has none)
--   resets_at     when the state is as fresh as a new client's (the whole
--                 quota back): fixed_window the end of the window;
--                 sliding_window two windows after window_start;
--                 token_bucket the tat, when the bucket is full again;
--                 sliding_log when the newest logged request leaves the
--                 window (the last two rounded up to the second)
--   reset_in_s    whole seconds from now until then (0 once passed)
--   expired       1 when the row is stale (its count no longer applies)
--   prev_count    sliding_window: requests of the window before (else 0)
--   tat           token_bucket: the theoretical arrival time with
--                 milliseconds; the further ahead of now, the emptier the
--                 bucket (NULL for the other algorithms)
--   log_rows      sliding_log: rows in rlg_log, the admitted requests still
--                 kept (0 for the other algorithms)
-- Example: SELECT * FROM clients WHERE NOT expired ORDER BY count DESC;
CREATE VIEW IF NOT EXISTS clients AS
WITH now (ms) AS (
	SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
)
SELECT
	s.policy,
	s.client,
	s.count,
	CASE WHEN s.tat_us = 0 THEN
	    datetime(s.window_start_ms / 1000, 'unixepoch') END AS window_start,
	datetime(s.expires_ms / 1000, 'unixepoch')         AS resets_at,
	max(0, (s.expires_ms - now.ms + 999) / 1000)       AS reset_in_s,
	s.expires_ms <= now.ms                             AS expired,
	s.prev_count,
	CASE WHEN s.tat_us > 0 THEN strftime('%Y-%m-%d %H:%M:%f',
	    s.tat_us / 1000 / 1000.0, 'unixepoch') END     AS tat,
	(SELECT count(*) FROM rlg_log AS l
	 WHERE l.policy = s.policy AND l.client = s.client) AS log_rows
FROM rlg_state AS s, now;

-- One row per policy:
--   active_clients  clients whose state has not expired
--   total_count     requests admitted in their current windows (0 for a
--                   token bucket, which counts none)
--   expired_rows    stale rows that the next prune deletes
--   log_rows        sliding_log: rows in rlg_log (at most limit per client)
CREATE VIEW IF NOT EXISTS summary AS
WITH now (ms) AS (
	SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
),
logs (policy, n) AS (
	SELECT policy, count(*) FROM rlg_log GROUP BY policy
)
SELECT
	s.policy,
	sum(s.expires_ms > now.ms) AS active_clients,
	coalesce(sum(CASE WHEN s.expires_ms > now.ms THEN s.count END), 0)
	    AS total_count,
	sum(s.expires_ms <= now.ms) AS expired_rows,
	coalesce(max(logs.n), 0) AS log_rows
FROM rlg_state AS s CROSS JOIN now LEFT JOIN logs ON logs.policy = s.policy
GROUP BY s.policy;

-- The penalty box: one row per (policy, client) whose ban still holds
-- ([policy NAME] ban). rlgate --reset CLIENT lifts one (it deletes the
-- client's states).
--   banned_until  when the ban ends (UTC)
--   ban_left_s    seconds until then, the Retry-After its refusals carry
-- Example: SELECT * FROM bans ORDER BY ban_left_s DESC;
CREATE VIEW IF NOT EXISTS bans AS
WITH now (ms) AS (
	SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
)
SELECT
	s.policy,
	s.client,
	datetime(s.ban_until_ms / 1000, 'unixepoch')       AS banned_until,
	(s.ban_until_ms - now.ms + 999) / 1000             AS ban_left_s
FROM rlg_state AS s, now
WHERE s.ban_until_ms > now.ms;

-- Per-client overrides (tiers), for operators to edit while rlgate runs
-- (db/queries.sql has the statements): one row per (policy, client).
-- rlgate only reads this table; the gate parses and checks each row, and
-- skips a bad one with a log line.
--   policy      a [policy NAME] of the config
--   client      an IPv4 or IPv6 address, a CIDR (203.0.113.0/24), or an
--               API key's hash: "k:" and 32 lowercase hex digits
--               (rlgate --hash-key)
--   spec        "limit=N window=S burst=B", space-separated, any of them
--               (window in seconds, burst for token_bucket), or "exempt"
--   note        the operator's own, never read by rlgate
--   created_ms  when the row was inserted (ms since the epoch, UTC)
CREATE TABLE IF NOT EXISTS rlg_override (
	policy     TEXT    NOT NULL,
	client     TEXT    NOT NULL,
	spec       TEXT    NOT NULL,
	note       TEXT,
	created_ms INTEGER NOT NULL DEFAULT
	    (CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)),
	PRIMARY KEY (policy, client)
) WITHOUT ROWID;

-- The version of the overrides: one row, which the triggers below move on
-- in the same transaction as every insert, update or delete of
-- rlg_override. Each worker of rlgate reads this row about twice a second
-- and reads rlg_override again only when it changed. It starts at a random
-- value (1 to 2^62) when the table is created, so that a database file
-- replaced by another never shows a version a running rlgate saw on the
-- old one. Never 0 (rlgate's "never read"): after 2^63 - 2 comes 1.
CREATE TABLE IF NOT EXISTS rlg_override_version (
	id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
	version INTEGER NOT NULL
);

INSERT OR IGNORE INTO rlg_override_version (id, version)
	VALUES (1, abs(random() % 4611686018427387904) + 1);

CREATE TRIGGER IF NOT EXISTS rlg_override_insert
AFTER INSERT ON rlg_override
BEGIN
	UPDATE rlg_override_version
	    SET version = version % 9223372036854775806 + 1 WHERE id = 1;
END;

CREATE TRIGGER IF NOT EXISTS rlg_override_update
AFTER UPDATE ON rlg_override
BEGIN
	UPDATE rlg_override_version
	    SET version = version % 9223372036854775806 + 1 WHERE id = 1;
END;

CREATE TRIGGER IF NOT EXISTS rlg_override_delete
AFTER DELETE ON rlg_override
BEGIN
	UPDATE rlg_override_version
	    SET version = version % 9223372036854775806 + 1 WHERE id = 1;
END;

PRAGMA user_version = 5;
