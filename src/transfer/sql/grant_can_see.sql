-- grant_can_see: whether principal $1 may see cluster $2 at all (sql/functions/permissions.sql).
SELECT transfer_can_see($1, $2)
