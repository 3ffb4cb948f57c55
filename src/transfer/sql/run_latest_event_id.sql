-- run_latest_event_id: the highest id in run $1's event log, 0 when it has none: where a reader that wants only
-- what is new begins (a run's shared event-stream poll, src/api/feed.rs).
SELECT coalesce(max(id), 0) FROM run_event WHERE run_id = $1
