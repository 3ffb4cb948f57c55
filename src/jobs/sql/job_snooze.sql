-- job_snooze: job $1 is not ready yet (pacing, waiting for room, no permit); run it again at $3 and give the
-- attempt back: waiting does not consume the retry budget. Only while token $2 holds its lease.
UPDATE job
SET state = 'pending', run_at = $3, attempt = greatest(attempt - 1, 0), lease_token = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_token = $2 AND state = 'running'
