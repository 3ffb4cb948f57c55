-- grant_list: the grants, of principal $1 and on cluster $2 when given (null: any).
SELECT principal, cluster, permission, granted_by, granted_at FROM transfer_grant
WHERE ($1::text IS NULL OR principal = $1) AND ($2::text IS NULL OR cluster = $2)
ORDER BY principal, cluster, permission
