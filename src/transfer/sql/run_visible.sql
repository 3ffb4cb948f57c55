-- run_visible: whether run $1 exists and principal $2 may see both of its clusters.
SELECT EXISTS (
    SELECT 1 FROM transfer_run
    WHERE id = $1 AND transfer_can_see($2, source_cluster) AND transfer_can_see($2, target_cluster)
)
