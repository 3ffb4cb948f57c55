-- audit_insert: actor $1 did action $2 to target $3 with outcome $4 (detail $5), concerning clusters $6 and $7
-- (null: the trigger audit_fill_clusters fills them from a run target). The row's id.
INSERT INTO audit (actor, action, target, outcome, detail, source_cluster, target_cluster)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING id
