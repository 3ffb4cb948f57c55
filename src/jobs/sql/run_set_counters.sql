-- run_set_counters: merge $2 into run $1's counters (the handler's progress, inside its fenced transaction).
UPDATE transfer_run SET counters = counters || $2 WHERE id = $1
