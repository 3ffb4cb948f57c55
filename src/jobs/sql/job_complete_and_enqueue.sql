-- job_complete_and_enqueue: job $1 is done (if token $2 still holds its lease) and its run's next job —
-- sequence + 1, kind $3, payload $4, due at $5 (NULL = now), priority $6, $7 attempts — is inserted, in one
-- statement. The completion runs first (the insert reads its result), so job_one_live_per_run sees the run's
-- live job gone; no row back = the lease was lost and nothing was written.
--
-- Continuation: when $8 (a worker) is given and the next job is due now, it is inserted already leased to
-- that worker for $9 seconds (attempt 1), so the worker runs it straight away, without a claim statement and
-- its commit. The run holds its slot (it is running), so the claim's slot rule holds; stop requests are
-- checked by the executor as for any claim. The executor bounds how many it chains (fairness).
WITH done AS (
    UPDATE job
    SET state = 'completed', finished_at = now(), lease_token = NULL, lease_expires_at = NULL
    WHERE id = $1 AND lease_token = $2 AND state = 'running'
    RETURNING run_id, seq
),
next AS (
    SELECT d.run_id, d.seq + 1 AS seq, coalesce($5, now()) AS run_at,
           ($8::text IS NOT NULL AND coalesce($5, now()) <= now()) AS chained
    FROM done d
)
INSERT INTO job (run_id, seq, kind, payload, run_at, priority, max_attempts,
                 state, attempt, lease_owner, lease_token, lease_expires_at, attempted_at)
SELECT n.run_id, n.seq, $3, $4, n.run_at, $6, $7,
       CASE WHEN n.chained THEN 'running' ELSE 'pending' END,
       CASE WHEN n.chained THEN 1 ELSE 0 END,
       CASE WHEN n.chained THEN $8 END,
       CASE WHEN n.chained THEN gen_random_uuid() END,
       CASE WHEN n.chained THEN now() + make_interval(secs => $9) END,
       CASE WHEN n.chained THEN now() END
FROM next n
RETURNING *
