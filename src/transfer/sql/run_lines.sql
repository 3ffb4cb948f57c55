-- run_lines: the newest $1 runs, newest first (made later first; among runs made in the same microsecond, the
-- greater id first), each condition only when given (null is any): in state $2; both of whose clusters principal
-- $3 may see; after the run made at $4 with id $5 in that order (the keyset of the next page); from or to
-- cluster $6; started by $7; made at or after $8 and before $9; from or to queue $10; whose row changed
-- (updated_at, stamped by the trigger transfer_run_changed) after $11. The columns of view::RunRecord.
SELECT id, state, mode, source_cluster, source_node, source_queue, target_cluster, target_node, target_queue,
       counters, relay, stop_reason, last_error, started_by, created_at, executed_at, ended_at, staging_queue,
       updated_at,
       (state = 'previewed' AND EXISTS (
           SELECT 1 FROM jsonb_array_elements(coalesce(preview->'findings', '[]'::jsonb)) f
           WHERE f->>'kind' = 'refused')) AS refused,
       (preview->>'selection_size')::bigint AS previewed_size,
       (preview->>'selection_at_least')::bigint AS previewed_at_least
FROM transfer_run
WHERE ($2::text IS NULL OR state = $2)
  AND ($3::text IS NULL OR (transfer_can_see($3, source_cluster) AND transfer_can_see($3, target_cluster)))
  AND ($4::timestamptz IS NULL OR (created_at, id) < ($4, $5::uuid))
  AND ($6::text IS NULL OR source_cluster = $6 OR target_cluster = $6)
  AND ($7::text IS NULL OR started_by = $7)
  AND ($8::timestamptz IS NULL OR created_at >= $8)
  AND ($9::timestamptz IS NULL OR created_at < $9)
  AND ($10::text IS NULL OR source_queue = $10 OR target_queue = $10)
  AND ($11::timestamptz IS NULL OR updated_at > $11)
ORDER BY created_at DESC, id DESC
LIMIT $1
