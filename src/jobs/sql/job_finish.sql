-- job_finish: job $1 ends as $3 ('failed' or 'cancelled') with $4 as its last error (NULL keeps the one it
-- has), if token $2 still holds its lease.
UPDATE job
SET state = $3, finished_at = now(), last_error = coalesce($4, last_error), lease_token = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_token = $2 AND state = 'running'
