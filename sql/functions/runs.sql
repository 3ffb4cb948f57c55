-- Starting and stopping a run, shared by the engine (jobs::runs) and the operator's actions (actions.sql).

-- transfer_run_start(run, kind, payload, started_by, max_attempts, run_at, priority): starts (or resumes) `run`
-- with a new pending job of `kind` and `payload` as its next job. The run is queued until a claim takes a
-- `concurrent runs` slot for it, then running. A resumed run continues its job sequence. Refused with AT001 when
-- there is no such run, AT002 when it is not previewed, stopped, interrupted or failed; a second active run on
-- the same source queue fails on transfer_run_one_active_per_source, a second live job on job_one_live_per_run.
-- Wakes the workers (NOTIFY transfer_job) when the transaction commits. jobs::runs::start calls this.
CREATE OR REPLACE FUNCTION transfer_run_start(
    p_run uuid, p_kind text, p_payload jsonb, p_started_by text, p_max_attempts integer,
    p_run_at timestamptz DEFAULT NULL, p_priority smallint DEFAULT 0)
RETURNS TABLE (job_id bigint, job_seq bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    v_state text;
    v_seq   bigint;
    v_job   bigint;
    v_due   timestamptz;
BEGIN
    -- The run row first, as every change of a run (run_lock): it waits for a batch that is committing.
    SELECT r.state INTO v_state FROM transfer_run r WHERE r.id = p_run FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'AT001', MESSAGE = format('there is no run %s', p_run);
    END IF;
    IF v_state NOT IN ('previewed', 'stopped', 'interrupted', 'failed') THEN
        RAISE EXCEPTION USING ERRCODE = 'AT002', MESSAGE = format('run %s is %s: cannot start', p_run, v_state),
            DETAIL = jsonb_build_object('state', v_state, 'action', 'start')::text;
    END IF;
    SELECT coalesce(max(j.seq) + 1, 0) INTO v_seq FROM job j WHERE j.run_id = p_run;
    UPDATE transfer_run
    SET state = 'queued', stop_requested = false, stop_reason = NULL, ended_at = NULL,
        started_by = coalesce(p_started_by, started_by)
    WHERE id = p_run;
    INSERT INTO job (run_id, seq, kind, payload, run_at, priority, max_attempts)
    VALUES (p_run, v_seq, p_kind, p_payload, coalesce(p_run_at, now()), coalesce(p_priority, 0), p_max_attempts)
    RETURNING id, run_at INTO v_job, v_due;
    PERFORM pg_notify('transfer_job', floor(extract(epoch FROM v_due) * 1000000)::bigint::text);
    INSERT INTO run_event (run_id, kind, detail)
    VALUES (p_run, 'started', jsonb_build_object('by', p_started_by, 'job_id', v_job, 'seq', v_seq, 'from', v_state));
    job_id := v_job;
    job_seq := v_seq;
    RETURN NEXT;
END;
$$;

-- transfer_run_request_stop(run, reason): asks `run` to stop. Returns {"stop": "stopped"} when nothing was in
-- flight or in doubt (the live job, if any, is cancelled, the run Stopped and its slot released now),
-- {"stop": "requested"} when a batch is in flight (it finishes; the run stops at its next claim, whichever worker
-- makes it), or {"stop": "already_ended", "state": …} for a run that had ended or was never started. AT001: no
-- such run. jobs::runs::request_stop calls this.
-- A stop settles the batch in doubt first (docs/guarantees.md, I6), also when the run's job is pending: paced, snoozed, or
-- backing off after a transient error. A stop that cancelled such a job at once would leave the batch in doubt —
-- sent to the target, its source acknowledgement unknown — until a resume or a return hours later, while the
-- target's duplicate-id cache may forget it. So a run whose cursor names ids in doubt (or a refill whose answer was
-- never recorded) keeps its job, made due now; the worker that claims it sees the stop request, settles what is in
-- doubt and stops the run (relay/batch.rs).
CREATE OR REPLACE FUNCTION transfer_run_request_stop(p_run uuid, p_reason text)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_state text;
    v_relay jsonb;
    v_job   job;
BEGIN
    SELECT r.state, r.relay INTO v_state, v_relay FROM transfer_run r WHERE r.id = p_run FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'AT001', MESSAGE = format('there is no run %s', p_run);
    END IF;
    IF v_state IN ('previewed', 'succeeded', 'partial', 'unproven', 'returned', 'stopped', 'interrupted', 'failed') THEN
        RETURN jsonb_build_object('stop', 'already_ended', 'state', v_state);
    END IF;
    UPDATE transfer_run SET stop_requested = true, stop_reason = p_reason WHERE id = p_run;
    SELECT * INTO v_job FROM job j WHERE j.run_id = p_run AND j.state IN ('pending', 'running') FOR UPDATE;
    IF FOUND AND v_job.state = 'running' THEN
        INSERT INTO run_event (run_id, kind, detail)
        VALUES (p_run, 'stop_requested', jsonb_build_object('reason', p_reason, 'job_id', v_job.id));
        RETURN jsonb_build_object('stop', 'requested');
    END IF;
    IF FOUND AND (jsonb_array_length(coalesce(v_relay -> 'in_doubt', '[]'::jsonb)) > 0
                  OR coalesce(v_relay -> 'refill', 'null'::jsonb) <> 'null'::jsonb) THEN
        -- Something is in doubt: the job settles it first, now rather than at its planned time.
        UPDATE job SET run_at = now() WHERE id = v_job.id;
        PERFORM pg_notify('transfer_job', (extract(epoch FROM now()) * 1000000)::bigint::text);
        INSERT INTO run_event (run_id, kind, detail)
        VALUES (p_run, 'stop_requested',
                jsonb_build_object('reason', p_reason, 'job_id', v_job.id, 'settling_in_doubt', true));
        RETURN jsonb_build_object('stop', 'requested');
    END IF;
    -- Nothing in flight and nothing in doubt (a paced, backing-off or queued job, or none): stop now, so a queued
    -- run stops too.
    UPDATE job
    SET state = 'cancelled', finished_at = now(), last_error = p_reason, lease_token = NULL, lease_expires_at = NULL
    WHERE run_id = p_run AND state IN ('pending', 'running');
    UPDATE transfer_run
    SET state = 'stopped', stop_reason = coalesce(p_reason, stop_reason), ended_at = now()
    WHERE id = p_run;
    UPDATE run_slot SET run_id = NULL, taken_at = NULL WHERE run_id = p_run;
    IF FOUND THEN
        -- A queued run elsewhere may now take the slot.
        PERFORM pg_notify('transfer_job', 'slot');
    END IF;
    INSERT INTO run_event (run_id, kind, detail) VALUES (p_run, 'stopped', jsonb_build_object('reason', p_reason));
    RETURN jsonb_build_object('stop', 'stopped');
END;
$$;

-- transfer_first_job(plan, staging queue, action): the job a run of `plan` starts with when `action` ('execute',
-- 'resume', 'return') starts it — the kind and payload of transfer::relay::Phase::job(), all of kind
-- 'transfer.run' (migration 0013; 'transfer.move' before it, when moves were the only runs):
--   a copy (execute, resume)            {"phase": "copy_slice"} (a time slice of browsing; the ledger says what is
--                                       done); a copy has nothing to return (AT011)
--   return                              {"phase": "return"}
--   a move between two queues of a node {"phase": "local_move"} (the broker's own move, no staging)
--   resume of a move that has staging   {"phase": "relay"}
--   any other move                      {"phase": "prepare"}
CREATE OR REPLACE FUNCTION transfer_first_job(p_plan jsonb, p_staging_queue text, p_action text)
RETURNS TABLE (kind text, payload jsonb)
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_phase text;
BEGIN
    IF p_plan ->> 'mode' = 'copy' THEN
        IF p_action = 'return' THEN
            RAISE EXCEPTION USING ERRCODE = 'AT011',
                MESSAGE = 'a copy has nothing to return: the source still holds every message it copied';
        END IF;
        v_phase := 'copy_slice';
    ELSIF p_plan ->> 'mode' IS DISTINCT FROM 'move' THEN
        RAISE EXCEPTION USING ERRCODE = 'AT011',
            MESSAGE = format('a run of mode %s cannot start', coalesce(p_plan ->> 'mode', 'unknown'));
    ELSIF p_action = 'return' THEN
        v_phase := 'return';
    ELSIF (p_plan -> 'source' ->> 'cluster') = (p_plan -> 'target' ->> 'cluster')
          AND (p_plan -> 'source' ->> 'node') = (p_plan -> 'target' ->> 'node') THEN
        v_phase := 'local_move';
    ELSIF p_action = 'resume' AND p_staging_queue IS NOT NULL THEN
        v_phase := 'relay';
    ELSE
        v_phase := 'prepare';
    END IF;
    kind := 'transfer.run';
    payload := jsonb_build_object('phase', v_phase);
    RETURN NEXT;
END;
$$;

-- run_rate_sample(): the trigger (migration 0016) that samples a run's delivered count each time a change of its
-- counters changes it: the run's rate over time, for the console's chart and `GET /runs/{run}/rate`. At most one
-- sample a run a second (migration 0017): a change within the second of the run's latest sample (`at_second`, its
-- column default) updates that row to the new count and instant.
CREATE OR REPLACE FUNCTION run_rate_sample() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO run_rate_sample (run_id, delivered)
    VALUES (NEW.id, greatest(coalesce((NEW.counters ->> 'delivered')::bigint, 0), 0))
    ON CONFLICT ON CONSTRAINT run_rate_sample_one_a_second
    DO UPDATE SET delivered = EXCLUDED.delivered, at = EXCLUDED.at;
    RETURN NULL;
END;
$$;

-- transfer_run_changed(): the trigger (migration 0018, ADR 0025) that stamps every write of a run's row with its
-- instant (`updated_at`, what `GET /api/v1/runs?changed_after=` compares), whoever writes. First a shared advisory
-- lock (key 1634890866, the whole second of the write since 2020-01-01 UTC), held until the transaction ends: while
-- the write is not yet committed, a reader finds the lock (run_changes_as_of.sql) and answers an `as_of` no later
-- than it, so the write is listed by the next poll whenever it commits. The lock is taken before the instant is
-- read: a reader that looked before the lock was taken began before the stamp, and answers an `as_of` earlier.
CREATE OR REPLACE FUNCTION transfer_run_changed() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1634890866,
        floor(extract(epoch FROM clock_timestamp() - timestamptz '2020-01-01 00:00:00+00'))::integer);
    NEW.updated_at := clock_timestamp();
    RETURN NEW;
END;
$$;
