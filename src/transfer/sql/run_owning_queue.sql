-- run_owning_queue: a run that names queue $1 as its staging, or whose id is $2 (the uuid the name carries).
SELECT id FROM transfer_run WHERE staging_queue = $1 OR id = $2 LIMIT 1
