-- db/queries.sql: queries for operators, to paste into the sqlite3 shell.
--
--   sqlite3 /var/lib/rlgate/rlgate.db
--   sqlite> .mode box
--
-- The database is in WAL mode, so reading it while rlgate serves is safe
-- and blocks nobody. Writing (the DELETEs below) takes the write lock for a
-- moment: rlgate waits for it up to busy_timeout_ms. Keep write transactions
-- short and never leave a BEGIN open in the shell.
--
-- Times in rlg_state and rlg_log are milliseconds since the epoch (UTC),
-- tat_us microseconds; the views clients and summary (db/schema.sql) show
-- them readable. Deleting a row of rlg_state deletes that client's rows of
-- rlg_log with it (a trigger), so every reset below covers the sliding log.

-- Schema version (4 for this rlgate; rlgate migrates a version 1, 2 or 3
-- file by itself when it opens it).
PRAGMA user_version;

-- Clients held per policy, what [store] max_clients is checked against
-- (kept by triggers; stale rows count until the next prune).
SELECT policy, clients FROM rlg_clients ORDER BY clients DESC;

-- Per policy: active clients, requests admitted in current windows, stale
-- rows awaiting the next prune.
SELECT * FROM summary;

-- Top 20 clients by requests in their current window.
SELECT policy, client, count, window_start, resets_at, reset_in_s
FROM clients
WHERE NOT expired
ORDER BY count DESC
LIMIT 20;

-- Token buckets, emptiest first: the further the tat is ahead of now, the
-- fewer requests the bucket takes at once (none once it is burst emission
-- intervals ahead). full_in_s: seconds until the bucket is full again.
SELECT policy, client, tat, reset_in_s AS full_in_s
FROM clients
WHERE tat IS NOT NULL AND NOT expired
ORDER BY tat DESC
LIMIT 20;

-- Sliding logs: the clients with the most logged requests (at most the
-- policy's limit each).
SELECT policy, client, log_rows, window_start AS oldest, resets_at
FROM clients
WHERE log_rows > 0
ORDER BY log_rows DESC
LIMIT 20;

-- One client's sliding log, readable, oldest first (put the client key in
-- place of 203.0.113.7).
SELECT policy,
       strftime('%Y-%m-%d %H:%M:%f', ts_ms / 1000.0, 'unixepoch') AS at,
       seq
FROM rlg_log
WHERE client = '203.0.113.7'
ORDER BY policy, ts_ms, seq;

-- Clients at their limit right now (rejected until resets_at). The limit
-- lives in the config, not in the database: set it first, e.g. 60, with
--   .parameter set :limit 60
-- (or write the number in place of :limit).
SELECT policy, client, count, resets_at, reset_in_s
FROM clients
WHERE NOT expired AND count >= :limit
ORDER BY reset_in_s DESC;

-- One client's state under every policy (put the client key in place of
-- 203.0.113.7).
SELECT * FROM clients WHERE client = '203.0.113.7';

-- Row counts: all rows, live rows.
SELECT count(*) AS rows,
       sum(NOT expired) AS live
FROM clients;

-- Manual reset of one client: it gets its full quota back at once, under
-- every policy (add "AND policy = 'default'" for one policy only); its
-- sliding log goes with it.
DELETE FROM rlg_state WHERE client = '203.0.113.7';

-- Manual prune of stale rows (rlgate does this by itself in batches).
DELETE FROM rlg_state
WHERE expires_ms <=
      CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER);

-- File size in bytes, and the part of it that is free pages (reused before
-- the file grows; VACUUM gives it back to the file system).
SELECT page_count * page_size AS bytes,
       freelist_count * page_size AS free_bytes
FROM pragma_page_count(), pragma_page_size(), pragma_freelist_count();

-- Or as the plain pragmas.
PRAGMA page_count;
PRAGMA page_size;

-- Size of the write-ahead log: checkpoint it into the main file now.
-- (Returns busy, log frames, checkpointed frames.)
PRAGMA wal_checkpoint(PASSIVE);

-- Integrity check after a crash or a disk problem ("ok" when sound).
PRAGMA quick_check;

-- Start afresh while rlgate serves: every client gets its full quota (the
-- sliding logs go too).
DELETE FROM rlg_state;

-- ---- Per-client overrides (tiers) --------------------------------------
--
-- One row of rlg_override per (policy, client): a client that gets other
-- limits than its [policy NAME] gives, or none at all. Every rlgate worker
-- reads rlg_override_version about twice a second and the rows again when
-- it moved (triggers move it with every insert, update and delete), so a
-- change is in force within about a second, with no reload.
--   client  an IPv4 or IPv6 address (203.0.113.7, 2001:db8::1), a CIDR
--           (198.51.100.0/24, 2001:db8::/32), or an API key by its hash:
--           "k:" and the 32 lowercase hex digits that rlgate prints
--           for each key it reads on its standard input, one a line
--           (never on the command line, where ps would show it):
--             rlgate --config FILE --hash-key < KEYS
--   spec    space-separated, any of them: limit=N (requests per window),
--           window=S (seconds), burst=B (token_bucket); or the word exempt
-- rlgate only reads the table: the gate checks each row and logs and
-- skips a bad one (an unknown policy, a bad spec or client).

-- The overrides, newest first, with the version the workers compare.
SELECT policy, client, spec, note,
       datetime(created_ms / 1000, 'unixepoch') AS created
FROM rlg_override
ORDER BY created_ms DESC;
SELECT version FROM rlg_override_version;

-- One client gets 600 requests per minute under [policy default] (again
-- for the same policy and client: its spec and note are replaced).
INSERT INTO rlg_override (policy, client, spec, note)
VALUES ('default', '203.0.113.7', 'limit=600 window=60', 'customer 42')
ON CONFLICT (policy, client) DO UPDATE
SET spec = excluded.spec, note = excluded.note;

-- A network exempt from [policy default].
INSERT INTO rlg_override (policy, client, spec, note)
VALUES ('default', '198.51.100.0/24', 'exempt', 'monitoring')
ON CONFLICT (policy, client) DO UPDATE
SET spec = excluded.spec, note = excluded.note;

-- An API key (by its hash, from rlgate --hash-key) with a larger bucket
-- under a token_bucket policy [policy api].
INSERT INTO rlg_override (policy, client, spec, note)
VALUES ('api', 'k:0123456789abcdef0123456789abcdef', 'limit=6000 burst=200',
        'partner')
ON CONFLICT (policy, client) DO UPDATE
SET spec = excluded.spec, note = excluded.note;

-- Remove one override: the client is back to its policy's limits.
DELETE FROM rlg_override
WHERE policy = 'default' AND client = '203.0.113.7';

-- Backups and restores, while rlgate serves, through SQLite's own locks:
--   .backup /var/backups/rlgate.db
--   .restore /var/backups/rlgate.db
-- Never cp or mv a file over the live database: SQLite would apply the
-- rlgate.db-wal left beside it to the new file. Removing the database is
-- fine (remove rlgate.db, rlgate.db-wal and rlgate.db-shm together): each
-- rlgate process notices within a second and recreates it, empty.
