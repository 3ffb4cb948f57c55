-- job_list: jobs, newest first, optionally only in state $1 and of run $2, at most $3.
SELECT * FROM job
WHERE ($1::text IS NULL OR state = $1) AND ($2::uuid IS NULL OR run_id = $2)
ORDER BY id DESC
LIMIT $3
