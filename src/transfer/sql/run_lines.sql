-- run_lines: the newest $1 runs, in state $2, both of whose clusters principal $3 may see, made before $4 (each
-- condition only when given: null is any). The columns of view::RunRecord.
SELECT id, state, mode, source_cluster, source_node, source_queue, target_cluster, target_node, target_queue,
       counters, relay, stop_reason, last_error, started_by, created_at, executed_at, ended_at, staging_queue
FROM transfer_run
WHERE ($2::text IS NULL OR state = $2)
  AND ($3::text IS NULL OR (transfer_can_see($3, source_cluster) AND transfer_can_see($3, target_cluster)))
  AND ($4::timestamptz IS NULL OR created_at < $4)
ORDER BY created_at DESC, id
LIMIT $1
