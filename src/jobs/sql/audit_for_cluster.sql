-- audit_for_cluster: the newest $2 audit rows that concern cluster $1 (as a run's source or target, or the
-- cluster an administrative action was on), older than row $3 when given; newest first. Uses
-- audit_by_source_cluster and audit_by_target_cluster (migration 0004).
SELECT id, at, actor, action, target, outcome, detail FROM audit
WHERE (source_cluster = $1 OR target_cluster = $1) AND ($3::bigint IS NULL OR id < $3)
ORDER BY id DESC LIMIT $2
