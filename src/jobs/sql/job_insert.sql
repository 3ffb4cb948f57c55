-- job_insert: a new pending job of run $1 with sequence $2. Refused by job_one_live_per_run if the run
-- still has a live job, and by job_run_seq_unique if that sequence exists: no duplicate successor.
INSERT INTO job (run_id, seq, kind, payload, run_at, priority, max_attempts)
VALUES ($1, $2, $3, $4, coalesce($5, now()), $6, $7)
RETURNING id, run_at
