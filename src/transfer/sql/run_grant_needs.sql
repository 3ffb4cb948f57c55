-- run_grant_needs: what decides the grants run $1 needs: who started it, its mode, its clusters; no row when the run
-- does not exist.
SELECT started_by, mode, source_cluster, target_cluster FROM transfer_run WHERE id = $1
