-- job_requeue: job $1 (failed, cancelled, or pending) becomes pending and due now with a fresh attempt
-- budget. Refused by job_one_live_per_run if its run has another live job.
UPDATE job
SET state = 'pending', attempt = 0, run_at = now(), finished_at = NULL, lease_token = NULL, lease_expires_at = NULL
WHERE id = $1 AND state IN ('failed', 'cancelled', 'pending')
RETURNING *
