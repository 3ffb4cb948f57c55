-- grant_delete: principal $1 loses permission $3 on cluster $2; no row when they did not hold it.
DELETE FROM transfer_grant WHERE principal = $1 AND cluster = $2 AND permission = $3
