-- relay_run_set_staging: run $1's staging queue is $2 (fenced).
UPDATE transfer_run SET staging_queue = $2 WHERE id = $1
