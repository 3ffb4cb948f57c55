-- job_release: give back job $1, claimed by token $2 but never started (the worker is shutting down):
-- pending again, due now, attempt returned.
UPDATE job
SET state = 'pending', run_at = now(), attempt = greatest(attempt - 1, 0), lease_token = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_token = $2 AND state = 'running'
