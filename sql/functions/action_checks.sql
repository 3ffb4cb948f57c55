-- The checks of the operator's actions (actions.sql): each raises its SQLSTATE of class AT (listed in
-- action_entry_points.sql) with a detail as JSON, or returns what the action needs.

-- An operator named, or AT000.
CREATE OR REPLACE FUNCTION transfer__operator_named(p_operator text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF coalesce(p_operator, '') = '' THEN
        RAISE EXCEPTION USING ERRCODE = 'AT000',
            MESSAGE = 'name the operator who acts: every action is checked against their grants and audited';
    END IF;
END;
$$;

-- Raises AT012 unless `principal` holds `permission` on `cluster`.
CREATE OR REPLACE FUNCTION transfer__require(p_principal text, p_permission text, p_cluster text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF NOT transfer_has_grant(p_principal, p_cluster, p_permission) THEN
        RAISE EXCEPTION USING ERRCODE = 'AT012', MESSAGE = transfer_lacks_words(p_principal, p_permission, p_cluster),
            DETAIL = jsonb_build_object('principal', p_principal, 'permission', p_permission, 'cluster', p_cluster)::text;
    END IF;
END;
$$;

-- The run, locked; AT001 when there is none, or when the operator may not see its source or target cluster (the
-- same words: an invisible cluster answers as if it did not exist, and so do its runs).
CREATE OR REPLACE FUNCTION transfer__run_for(p_run uuid, p_operator text)
RETURNS transfer_run
LANGUAGE plpgsql
AS $$
DECLARE
    r transfer_run;
BEGIN
    SELECT * INTO r FROM transfer_run WHERE id = p_run FOR UPDATE;
    IF NOT FOUND OR r.source_cluster IS NULL OR r.target_cluster IS NULL
       OR NOT transfer_can_see(p_operator, r.source_cluster) OR NOT transfer_can_see(p_operator, r.target_cluster) THEN
        RAISE EXCEPTION USING ERRCODE = 'AT001', MESSAGE = format('there is no run %s', p_run);
    END IF;
    RETURN r;
END;
$$;

-- Raises AT012 unless the operator holds what starting the run needs (its mode, source and target).
CREATE OR REPLACE FUNCTION transfer__require_start_grants(r transfer_run, p_operator text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    m record;
BEGIN
    SELECT * INTO m FROM transfer_missing_grant(p_operator, r.mode, r.source_cluster, r.target_cluster);
    IF FOUND THEN
        PERFORM transfer__require(p_operator, m.permission, m.cluster);
    END IF;
END;
$$;

-- Raises AT002: `action` does not apply to the run's state.
CREATE OR REPLACE FUNCTION transfer__wrong_state(p_run uuid, p_state text, p_action text, p_applies_to text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'AT002',
        MESSAGE = format('run %s is %s: %s applies only to %s', p_run, p_state, p_action, p_applies_to),
        DETAIL = jsonb_build_object('state', p_state, 'action', p_action)::text;
END;
$$;

-- The run's plan, or AT005 when it has none that a worker could read.
CREATE OR REPLACE FUNCTION transfer__plan(r transfer_run)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
BEGIN
    IF r.plan IS NULL OR jsonb_typeof(r.plan) <> 'object'
       OR (r.plan ->> 'mode') IS NULL OR (r.plan ->> 'mode') NOT IN ('move', 'copy')
       OR jsonb_typeof(r.plan -> 'source' -> 'queue') IS DISTINCT FROM 'string'
       OR jsonb_typeof(r.plan -> 'target' -> 'queue') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION USING ERRCODE = 'AT005',
            MESSAGE = 'the preview refused this run: the run has no readable plan',
            DETAIL = jsonb_build_object('words', 'the run has no readable plan')::text;
    END IF;
    RETURN r.plan;
END;
$$;

-- `cluster/node/queue` of one end of a plan, as the CLI spells it.
CREATE OR REPLACE FUNCTION transfer__display(p_end jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT format('%s/%s/%s', p_end ->> 'cluster', p_end ->> 'node', p_end ->> 'queue')
$$;

-- A boolean of the stored preview, true when absent or not a boolean (the stricter reading).
CREATE OR REPLACE FUNCTION transfer__preview_flag(p_preview jsonb, p_key text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN jsonb_typeof(p_preview -> p_key) = 'boolean' THEN (p_preview ->> p_key)::boolean ELSE true END
$$;

-- A stopped, interrupted or failed run, or AT002 for `action`.
CREATE OR REPLACE FUNCTION transfer__resumable(r transfer_run, p_action text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF r.state NOT IN ('stopped', 'interrupted', 'failed') THEN
        PERFORM transfer__wrong_state(r.id, r.state, p_action, 'a stopped, interrupted or failed run (stop it first)');
    END IF;
END;
$$;

-- A resumed or returning run starts without the old stop request.
CREATE OR REPLACE FUNCTION transfer__clear_stop(p_run uuid)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE transfer_run SET stop_requested = false, stop_reason = NULL
    WHERE id = p_run AND state IN ('stopped', 'interrupted', 'failed')
$$;

-- Starts the run with its first job for `action`; a second active run on the source queue is AT010. Returns the
-- result's detail: {"job": id, "seq": n}.
CREATE OR REPLACE FUNCTION transfer__start(r transfer_run, p_plan jsonb, p_action text, p_operator text, p_max_attempts integer)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_first      record;
    v_started    record;
    v_constraint text;
BEGIN
    SELECT * INTO v_first FROM transfer_first_job(p_plan, r.staging_queue, p_action);
    BEGIN
        SELECT * INTO v_started
        FROM transfer_run_start(r.id, v_first.kind, v_first.payload, p_operator, coalesce(p_max_attempts, 10));
    EXCEPTION WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS v_constraint = CONSTRAINT_NAME;
        IF v_constraint = 'transfer_run_one_active_per_source' THEN
            RAISE EXCEPTION USING ERRCODE = 'AT010',
                MESSAGE = format('another run is active on the source queue %s: wait for it, or stop it',
                                 transfer__display(p_plan -> 'source')),
                DETAIL = jsonb_build_object('queue', transfer__display(p_plan -> 'source'))::text;
        END IF;
        RAISE;
    END;
    RETURN jsonb_build_object('job', v_started.job_id, 'seq', v_started.job_seq);
END;
$$;
