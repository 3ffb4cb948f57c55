-- job_rescue: rotate the leases of every job worker $1 holds and expire them now: the dead worker's late
-- writes name the old token and fail; the next claim takes each job over as a new attempt.
UPDATE job
SET lease_token = gen_random_uuid(), lease_expires_at = now()
WHERE state = 'running' AND lease_owner = $1
RETURNING id
