-- run_events_after: what an event stream of run $1 sends next: up to 500 events after id $2 in order, and the
-- events at or below $2 but above $3 written in the last $4 seconds that are not among the ids $5 already sent
-- (an event whose transaction committed after a higher id was sent). One list, by id.
(SELECT id, at, kind, detail FROM run_event WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT 500)
UNION ALL
(SELECT id, at, kind, detail FROM run_event
 WHERE run_id = $1 AND id <= $2 AND id > $3
   AND at > now() - make_interval(secs => $4) AND NOT (id = ANY($5))
 ORDER BY id)
ORDER BY id
