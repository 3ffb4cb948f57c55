-- transfer_resume: resumes run $1 for operator $2, with $3 attempts per job by default
-- (sql/functions/action_entry_points.sql). A transfer_action_result: 00000 and the first job, or the refusal.
SELECT sqlstate, message, detail FROM transfer_resume($1, $2, $3)
