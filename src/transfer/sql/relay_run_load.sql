-- relay_run_load: what a relay job reads of run $1 at its start (relay::state::load).
SELECT id, state, plan, relay, counters, staging_queue, preview, stop_reason FROM transfer_run WHERE id = $1
