-- job_retry: job $1 failed transiently; try again at $3 (exponential backoff, stored so it survives
-- restarts), keeping the attempt it used. Only while token $2 holds its lease.
UPDATE job
SET state = 'pending', run_at = $3, last_error = $4, lease_token = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_token = $2 AND state = 'running'
