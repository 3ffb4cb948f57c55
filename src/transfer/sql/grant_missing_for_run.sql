-- grant_missing_for_run: the first grant principal $1 lacks for a run of mode $2 from cluster $3 to cluster $4, as
-- (permission, cluster); no row when they hold them all (sql/functions/permissions.sql).
SELECT permission, cluster FROM transfer_missing_grant($1, $2, $3, $4)
