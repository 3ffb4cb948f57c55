-- relay_event_insert: event $2 with detail $3 on run $1, inside the relay job's transaction.
INSERT INTO run_event (run_id, kind, detail) VALUES ($1, $2, $3)
