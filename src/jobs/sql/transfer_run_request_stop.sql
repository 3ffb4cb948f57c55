-- transfer_run_request_stop: asks run $1 to stop, with reason $2 (sql/functions/runs.sql). Its answer is
-- {"stop": "stopped" | "requested" | "already_ended", "state": …}; AT001 when the run does not exist.
SELECT transfer_run_request_stop($1, $2)
