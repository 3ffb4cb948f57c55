-- transfer_return: returns what run $1 holds in staging to its source queue, for operator $2, with $3 attempts
-- per job by default (sql/functions/action_entry_points.sql). A transfer_action_result: 00000 and the first job,
-- or the refusal.
SELECT sqlstate, message, detail FROM transfer_return($1, $2, $3)
