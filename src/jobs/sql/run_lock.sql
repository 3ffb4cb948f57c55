-- run_lock: run $1, locked until the transaction ends. Every multi-statement change of a run starts here,
-- so it serialises with handlers (job_lock_fenced locks the run row first too).
SELECT id, state, stop_requested, stop_reason, last_error, counters, started_by, created_at, updated_at, ended_at
FROM transfer_run WHERE id = $1 FOR UPDATE
