-- run_active_on_queue: whether a run holding or waiting for a slot has queue $3 of node $2 of cluster $1 as its
-- source.
SELECT EXISTS (
    SELECT 1 FROM transfer_run
    WHERE state IN ('queued', 'running', 'waiting', 'returning')
      AND source_cluster = $1 AND source_node = $2 AND source_queue = $3
)
