-- run_owning_queues: the runs (id, staging queue) that name one of the queues $1 as their staging, or whose id is
-- one of $2 (the uuids those queue names carry).
SELECT id, staging_queue FROM transfer_run WHERE staging_queue = ANY($1) OR id = ANY($2)
