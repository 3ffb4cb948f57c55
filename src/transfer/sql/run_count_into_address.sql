-- run_count_into_address: how many runs holding or waiting for a slot send to address $3 of node $2 of cluster $1
-- (a plan's target address, else its target queue).
SELECT count(*) FROM transfer_run
WHERE state IN ('queued', 'running', 'waiting', 'returning')
  AND target_cluster = $1 AND target_node = $2 AND coalesce(plan -> 'target' ->> 'address', target_queue) = $3
