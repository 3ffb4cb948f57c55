-- run_prune: delete at most $2 runs that ended before $1 and hold no staging, with their jobs and events; returns
-- how many jobs, events and runs were deleted.
--
-- A run holds no staging when it ended with its staging removed (succeeded, partial, unproven, returned), or when it
-- ended without ever recording one (stopped, interrupted or failed with staging_queue NULL: nothing was ever
-- moved into staging, since the relay records the queue before its first refill). A stopped, interrupted or
-- failed run that names its staging queue may be resumed or returned: it is never deleted, however old. A
-- preview never executed goes once it expired before $1 (execute refuses an expired preview, so it can never
-- start; one without an expiry is kept). Live runs (queued, running, waiting, returning) are never deleted: the state list says so, and a run
-- that still has a live job or a slot is skipped too, whatever its state says. Runs another transaction holds
-- (a resume, a requeue) are skipped (SKIP LOCKED) and taken at a later prune.
--
-- The audit table is never touched: its rows outlive the runs they name.
--
-- The child rows go in the same statement as their run: the foreign keys are checked at its end.
WITH doomed AS (
    SELECT r.id
    FROM transfer_run r
    WHERE ((r.ended_at < $1
            AND r.state IN ('succeeded', 'partial', 'unproven', 'returned', 'stopped', 'interrupted', 'failed')
            AND (r.staging_queue IS NULL OR r.state IN ('succeeded', 'partial', 'unproven', 'returned')))
           OR (r.state = 'previewed' AND r.preview_expires_at < $1))
      AND NOT EXISTS (SELECT 1 FROM job j WHERE j.run_id = r.id AND j.state IN ('pending', 'running'))
      AND NOT EXISTS (SELECT 1 FROM run_slot s WHERE s.run_id = r.id)
    ORDER BY coalesce(r.ended_at, r.preview_expires_at)
    LIMIT $2
    FOR UPDATE OF r SKIP LOCKED
), jobs AS (
    DELETE FROM job j USING doomed d WHERE j.run_id = d.id RETURNING 1
), events AS (
    DELETE FROM run_event e USING doomed d WHERE e.run_id = d.id RETURNING 1
), runs AS (
    DELETE FROM transfer_run r USING doomed d WHERE r.id = d.id RETURNING 1
)
SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM events) AS run_events,
       (SELECT count(*) FROM runs) AS runs
