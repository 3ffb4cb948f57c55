-- grant_held: whether principal $1 holds permission $3 on cluster $2 (sql/functions/permissions.sql).
SELECT transfer_has_grant($1, $2, $3)
