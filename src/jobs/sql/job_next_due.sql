-- job_next_due: the earliest instant at which job_claim could find something, or NULL when nothing is
-- scheduled. Pending jobs of runs that hold no slot count only while a slot under the cap is free (when one
-- frees, slot_release notifies). Claimers sleep until this instant instead of polling coarsely, so a paced
-- run reaches its rate.
SELECT least(
    (SELECT min(j.run_at)
     FROM job j
     WHERE j.state = 'pending'
       AND (EXISTS (SELECT 1 FROM run_slot s WHERE s.run_id = j.run_id)
            OR EXISTS (SELECT 1
                       FROM run_slot s, setting c
                       WHERE c.key = 'concurrent_runs' AND s.run_id IS NULL
                         AND s.slot <= (c.value #>> '{}')::integer))),
    (SELECT min(lease_expires_at) FROM job WHERE state = 'running')
) AS next_due
