-- run_event_insert: record event $2 with detail $3 on run $1.
INSERT INTO run_event (run_id, kind, detail) VALUES ($1, $2, $3)
