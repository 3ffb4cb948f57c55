-- run_request_stop: store a stop request on run $1 with reason $2; the next claim of its job (any worker)
-- sees it, so a lost signal still stops the run.
UPDATE transfer_run
SET stop_requested = true, stop_reason = $2
WHERE id = $1
