-- relay_run_save: run $1's relay cursor becomes $2 and its counters $3 (inside the job's fenced transaction).
UPDATE transfer_run SET relay = $2, counters = $3 WHERE id = $1
