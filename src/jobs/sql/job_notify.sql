-- job_notify: tell every listening worker that a job is due at $1 (microseconds since the epoch, as text)
-- or that a slot freed ('slot'). Delivered when the surrounding transaction commits.
SELECT pg_notify('transfer_job', $1)
