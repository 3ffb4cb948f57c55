-- run_event_list: run $1's events in order.
SELECT id, at, kind, detail FROM run_event WHERE run_id = $1 ORDER BY id
