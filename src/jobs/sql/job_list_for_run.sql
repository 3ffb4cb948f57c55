-- job_list_for_run: every job of run $1 in sequence order.
SELECT * FROM job WHERE run_id = $1 ORDER BY seq
