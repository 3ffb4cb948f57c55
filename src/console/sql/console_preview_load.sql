-- $1 run id: what the console's preview page shows of a run — its state, ends, plan, plan hash, the preview and its
-- expiry; no row when there is no such run.
SELECT state::text AS state,
       coalesce(mode, '?') AS mode,
       coalesce(source_cluster, '?') AS source_cluster,
       coalesce(source_node, '?') AS source_node,
       coalesce(source_queue, '?') AS source_queue,
       coalesce(target_cluster, '?') AS target_cluster,
       coalesce(target_node, '?') AS target_node,
       coalesce(target_queue, '?') AS target_queue,
       coalesce(plan, '{}'::jsonb) AS plan,
       coalesce(plan_hash, '') AS plan_hash,
       coalesce(preview, '{}'::jsonb) AS preview,
       preview_expires_at AS expires_at
FROM transfer_run
WHERE id = $1
