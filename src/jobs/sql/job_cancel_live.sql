-- job_cancel_live: cancel the live job of run $1 (pending, or running: its lease token is cleared, so its
-- worker's writes fail). Run under a lock on the run row (run_lock), which serialises with handlers.
UPDATE job
SET state = 'cancelled', finished_at = now(), last_error = $2, lease_token = NULL, lease_expires_at = NULL
WHERE run_id = $1 AND state IN ('pending', 'running')
RETURNING id
