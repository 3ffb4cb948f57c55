-- run_get: run $1.
SELECT id, state, stop_requested, stop_reason, last_error, counters, started_by, created_at, updated_at, ended_at
FROM transfer_run WHERE id = $1
