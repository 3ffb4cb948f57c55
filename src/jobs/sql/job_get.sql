-- job_get: job $1.
SELECT * FROM job WHERE id = $1
