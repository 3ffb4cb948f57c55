-- A stop settles the batch in doubt first (SPEC I6), also when the run's job is pending: paced, snoozed, or
-- backing off after a transient error. Until this migration such a stop cancelled the job at once, leaving the
-- batch in doubt — sent to the target, its source acknowledgement unknown — until a resume or a return hours
-- later, while the target's duplicate-id cache may forget it. Now a run whose cursor names ids in doubt (or a
-- refill whose answer was never recorded) keeps its job, made due now; the worker that claims it sees the stop
-- request, settles what is in doubt and stops the run (relay/batch.rs). A run with nothing in doubt stops at once,
-- as before.
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
    IF v_state IN ('previewed', 'succeeded', 'partial', 'returned', 'stopped', 'interrupted', 'failed') THEN
        RETURN jsonb_build_object('stop', 'already_ended', 'state', v_state);
    END IF;
    UPDATE transfer_run SET stop_requested = true, stop_reason = p_reason, updated_at = now() WHERE id = p_run;
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
    SET state = 'stopped', stop_reason = coalesce(p_reason, stop_reason), ended_at = now(), updated_at = now()
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
