-- transfer_run_start: starts (or resumes) run $1 with its next job of kind $2 and payload $3, by $4, with at
-- most $5 attempts, due at $6 (null: now), priority $7 (sql/functions/runs.sql). The job's id and sequence;
-- a refusal is raised as AT001 (no such run) or AT002 (a state it does not start from).
SELECT job_id, job_seq FROM transfer_run_start($1, $2, $3, $4, $5, $6, $7)
