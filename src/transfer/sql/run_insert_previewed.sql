-- run_insert_previewed: run $1, previewed by operator $2: mode $3, from queue $6 of node $5 of cluster $4 to queue
-- $9 of node $8 of cluster $7, with its plan $10, the plan's hash $11, the preview shown $12, valid until $13.
INSERT INTO transfer_run (id, state, started_by, mode, source_cluster, source_node, source_queue,
                          target_cluster, target_node, target_queue, plan, plan_hash, preview, preview_expires_at)
VALUES ($1, 'previewed', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
