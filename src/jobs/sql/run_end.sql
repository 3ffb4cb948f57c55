-- run_end: run $1 ends in state $2 (a final or resumable state). $3 is the last error in words (NULL keeps
-- the one it has), $4 the stop reason (NULL keeps the one it has).
UPDATE transfer_run
SET state = $2, last_error = coalesce($3, last_error), stop_reason = coalesce($4, stop_reason),
    ended_at = now()
WHERE id = $1
