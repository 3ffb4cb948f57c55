-- job_heartbeat: extend the lease of job $1 by $3 seconds, only while token $2 still holds it.
-- No row back = the lease is lost: the holder must stop.
UPDATE job
SET lease_expires_at = now() + make_interval(secs => $3)
WHERE id = $1 AND lease_token = $2 AND state = 'running'
RETURNING lease_expires_at
