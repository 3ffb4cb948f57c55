-- transfer_stop: asks run $1 to stop with reason $2, for operator $3 (sql/functions/action_entry_points.sql). A
-- transfer_action_result: 00000 and transfer_run_request_stop's answer, or the refusal.
SELECT sqlstate, message, detail FROM transfer_stop($1, $2, $3)
