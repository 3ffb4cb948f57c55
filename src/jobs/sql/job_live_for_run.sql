-- job_live_for_run: the live (pending or running) job of run $1, locked; at most one exists.
SELECT * FROM job WHERE run_id = $1 AND state IN ('pending', 'running') FOR UPDATE
