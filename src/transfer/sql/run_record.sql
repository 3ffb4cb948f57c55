-- run_record: run $1 as an operator sees it (the columns of view::RunRecord); no row when it does not exist.
SELECT id, state, mode, source_cluster, source_node, source_queue, target_cluster, target_node, target_queue,
       counters, relay, stop_reason, last_error, started_by, created_at, executed_at, ended_at, staging_queue
FROM transfer_run
WHERE id = $1
