-- transfer_execute: executes previewed run $1 with plan hash $2, the findings $3 acknowledged, the source queue's
-- name $4 typed, the safety cap overridden when $5, by operator $6, with $7 attempts per job unless the job says
-- otherwise (sql/functions/action_entry_points.sql). A transfer_action_result: SQLSTATE 00000 and the first job,
-- or the refusal's SQLSTATE (AT0xx), words and detail.
SELECT sqlstate, message, detail FROM transfer_execute($1, $2, $3, $4, $5, $6, $7)
