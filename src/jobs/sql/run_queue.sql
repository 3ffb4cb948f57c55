-- run_queue: run $1 is (re)started: queued until a claim takes a slot for it; a previous stop request and
-- end are forgotten.
UPDATE transfer_run
SET state = 'queued', stop_requested = false, stop_reason = NULL, ended_at = NULL,
    started_by = coalesce($2, started_by)
WHERE id = $1
