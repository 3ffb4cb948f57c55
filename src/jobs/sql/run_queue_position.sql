-- run_queue_position: 1-based place of queued run $1 among queued runs, in the order claims will take
-- them (priority, then run_at, then id of their live job); NULL when the run is not queued.
SELECT pos FROM (
    SELECT j.run_id, row_number() OVER (ORDER BY j.priority DESC, j.run_at, j.id) AS pos
    FROM job j JOIN transfer_run r ON r.id = j.run_id
    WHERE r.state = 'queued' AND j.state IN ('pending', 'running')
) q
WHERE q.run_id = $1
