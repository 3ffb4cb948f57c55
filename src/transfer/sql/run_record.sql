-- run_record: run $1 as an operator sees it (the columns of view::RunRecord); no row when it does not exist.
SELECT id, state, mode, source_cluster, source_node, source_queue, target_cluster, target_node, target_queue,
       counters, relay, stop_reason, last_error, started_by, created_at, executed_at, ended_at, staging_queue,
       updated_at,
       (state = 'previewed' AND EXISTS (
           SELECT 1 FROM jsonb_array_elements(coalesce(preview->'findings', '[]'::jsonb)) f
           WHERE f->>'kind' = 'refused')) AS refused,
       (preview->>'selection_size')::bigint AS previewed_size,
       (preview->>'selection_at_least')::bigint AS previewed_at_least
FROM transfer_run
WHERE id = $1
