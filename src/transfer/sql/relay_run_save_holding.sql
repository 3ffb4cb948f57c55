-- relay_run_save_holding: run $1's relay cursor becomes $2 and its counters $3, and, while it holds its slot
-- (running, waiting or returning), its state becomes $4; a run in any other state keeps it. One statement for what
-- relay_run_save and relay_run_set_active_state write one after the other (a batch's record: one round trip fewer).
UPDATE transfer_run
SET relay = $2,
    counters = $3,
    state = CASE WHEN state IN ('running', 'waiting', 'returning') THEN $4 ELSE state END
WHERE id = $1
