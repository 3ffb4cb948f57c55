-- relay_run_set_active_state: run $1, while it holds its slot (running, waiting or returning), goes to state $2; a
-- run in any other state is left alone.
UPDATE transfer_run SET state = $2
WHERE id = $1 AND state IN ('running', 'waiting', 'returning') AND state <> $2
