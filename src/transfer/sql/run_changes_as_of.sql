-- run_changes_as_of: the instant a list of runs read after this statement is complete up to (its `as_of`): every
-- write of a run's row that commits after that read is stamped later. It is this statement's start, or earlier when
-- a write of a run is not yet committed: the whole second of the oldest such write, which holds its shared advisory
-- lock (key 1634890866, seconds since 2020-01-01 UTC, transfer_run_changed() in sql/functions/runs.sql) until it
-- commits or rolls back; less a millisecond, as a stamp may fall exactly on that second. This must run before the
-- list's own statement, never in it: the list's snapshot must be taken after the locks were looked at, or a write
-- committing in between would be neither in the list nor among the locks. Advisory locks belong to a database: only
-- this one's are looked at.
SELECT least(statement_timestamp(),
             timestamptz '2020-01-01 00:00:00+00' + make_interval(secs => min(objid::bigint)))
       - interval '1 millisecond'
FROM pg_locks
WHERE locktype = 'advisory' AND classid = 1634890866 AND objsubid = 2 AND granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
