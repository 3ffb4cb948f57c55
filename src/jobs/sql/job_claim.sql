-- job_claim: hand up to $3 of the most urgent due jobs to worker $1 for $2 seconds, in ONE statement.
--
-- A job is due when it is pending with run_at passed, or running with an expired lease (its worker died or
-- stalled: the claim takes it over as a new attempt, records an event on the run, and names the lost worker
-- in last_error, so a job that keeps killing its workers runs out of attempts instead of killing every
-- replica). Jobs of runs that already hold a slot come first; a job of a run without one is claimed only if
-- it also takes a free slot (numbered up to the `concurrent_runs` setting) in this same statement. Jobs and
-- slots are taken with SKIP LOCKED, so concurrent claimers never wait on each other and never take the same
-- row. The candidate set is tiny: job_one_live_per_run allows one live job per run, so at most one candidate
-- per run and no two candidates of one run.
--
-- A candidate's run row is locked with its job, and skipped when locked: the claim later writes the run (a
-- queued run becomes running; a lease_expired event references it), and an operator's action (a stop, a
-- cancel) locks the run row first and then its job. Had the claim locked the job and then waited on the run,
-- the two would deadlock.
WITH cap AS (
    SELECT (value #>> '{}')::integer AS runs FROM setting WHERE key = 'concurrent_runs'
),
candidate AS (
    SELECT j.id, j.run_id, j.priority, j.run_at, j.state AS was_state, j.lease_owner AS was_owner,
           EXISTS (SELECT 1 FROM run_slot s WHERE s.run_id = j.run_id) AS holds_slot
    FROM job j
    JOIN transfer_run r ON r.id = j.run_id
    WHERE (j.state = 'pending' AND j.run_at <= now())
       OR (j.state = 'running' AND j.lease_expires_at <= now())
    ORDER BY holds_slot DESC, j.priority DESC, j.run_at, j.id
    LIMIT $3
    FOR UPDATE OF r, j SKIP LOCKED
),
-- Candidates whose run must take a slot, numbered in claim order…
needs_slot AS (
    SELECT c.run_id, row_number() OVER (ORDER BY c.priority DESC, c.run_at, c.id) AS n
    FROM candidate c
    WHERE NOT c.holds_slot
),
-- …and as many free slots as they need (fewer if fewer are free), locked, then numbered.
free_slot AS (
    SELECT s.slot
    FROM run_slot s, cap
    WHERE s.run_id IS NULL AND s.slot <= cap.runs
    ORDER BY s.slot
    LIMIT (SELECT count(*) FROM needs_slot)
    FOR UPDATE OF s SKIP LOCKED
),
numbered_slot AS (
    SELECT slot, row_number() OVER (ORDER BY slot) AS n FROM free_slot
),
took_slot AS (
    UPDATE run_slot s
    SET run_id = pair.run_id, taken_at = now()
    FROM (SELECT f.slot, w.run_id FROM numbered_slot f JOIN needs_slot w USING (n)) pair
    WHERE s.slot = pair.slot
    RETURNING s.run_id
),
claimed AS (
    UPDATE job j
    SET state = 'running',
        attempt = j.attempt + 1,
        lease_owner = $1,
        lease_token = gen_random_uuid(),
        lease_expires_at = now() + make_interval(secs => $2),
        attempted_at = now(),
        last_error = CASE WHEN c.was_state = 'running'
                          THEN format('the worker %s stopped renewing its lease (died or stalled)', c.was_owner)
                          ELSE j.last_error END
    FROM candidate c
    WHERE j.id = c.id AND (c.holds_slot OR c.run_id IN (SELECT run_id FROM took_slot))
    RETURNING j.*, c.was_state = 'running' AS reclaimed, c.was_owner
),
started AS (
    UPDATE transfer_run r
    SET state = 'running'
    FROM took_slot t
    WHERE r.id = t.run_id AND r.state = 'queued'
    RETURNING r.id
),
lease_expired_event AS (
    INSERT INTO run_event (run_id, kind, detail)
    SELECT run_id, 'lease_expired',
           jsonb_build_object('job_id', id, 'seq', seq, 'attempt', attempt, 'lost_by', was_owner, 'claimed_by', $1)
    FROM claimed
    WHERE reclaimed
)
SELECT c.id, c.state, c.kind, c.run_id, c.seq, c.attempt, c.max_attempts, c.priority, c.run_at, c.lease_owner,
       c.lease_token, c.lease_expires_at, c.attempted_at, c.last_error, c.payload, c.created_at, c.finished_at,
       c.reclaimed, r.stop_requested
FROM claimed c
JOIN transfer_run r ON r.id = c.run_id
ORDER BY c.priority DESC, c.run_at, c.id
