-- run_clusters: run $1's source and target cluster; no row when the run does not exist.
SELECT source_cluster, target_cluster FROM transfer_run WHERE id = $1
