-- job_lock_fenced: the first statement of a handler's transaction. Locks the run row, then the job row, but
-- only while token $3 still holds job $2's lease; no row back = lease lost. Holding both locks until commit
-- makes every later write of the transaction fenced: no claim can take the job over (claims skip locked
-- rows) and no admin action on the run can interleave (admin actions lock the run row first, in the same
-- order, so they wait instead of deadlocking). Returns the run's stop request as of now (it cannot change
-- before this transaction ends).
SELECT r.stop_requested
FROM transfer_run r
JOIN job j ON j.run_id = r.id
WHERE r.id = $1 AND j.id = $2 AND j.lease_token = $3 AND j.state = 'running'
FOR UPDATE OF r, j
