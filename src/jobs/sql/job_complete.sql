-- job_complete: job $1 is done, if token $2 still holds its lease.
UPDATE job
SET state = 'completed', finished_at = now(), lease_token = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_token = $2 AND state = 'running'
