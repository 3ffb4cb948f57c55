-- job_last_for_run: the job of run $1 with the highest sequence, locked.
SELECT * FROM job WHERE run_id = $1 ORDER BY seq DESC LIMIT 1 FOR UPDATE
