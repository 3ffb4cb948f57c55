-- grant_insert: principal $1 gets permission $3 on cluster $2, granted by $4; no row when they held it already.
INSERT INTO transfer_grant (principal, cluster, permission, granted_by) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING
