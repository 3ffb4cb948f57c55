-- job_next_seq: the sequence the next job of run $1 gets.
SELECT coalesce(max(seq) + 1, 0) FROM job WHERE run_id = $1
