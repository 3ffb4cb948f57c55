-- The operator's actions, checks first (action_checks.sql); called by the audited entry points
-- (action_entry_points.sql), which turn what a check raises into a transfer_action_result.

-- execute: every check of a confirmation, in this order (the first that fails is the answer): the run exists
-- and is visible; the operator holds what the run needs; it is Previewed; its plan is readable; the preview has
-- not expired; the plan hash is the previewed one; no finding refuses it; no acknowledgement of a code the
-- preview did not raise; every needs-acknowledgement code acknowledged; the source queue's name typed (a move,
-- over the cap, or of unknown size); the cap overridden when needed; a kind of run that can start. Then the
-- confirmation is recorded on the run and its first job queued.
CREATE OR REPLACE FUNCTION transfer__execute(
    p_run uuid, p_plan_hash text, p_acknowledged text[], p_typed_queue text, p_override_cap boolean,
    p_operator text, p_max_attempts integer)
RETURNS transfer_action_result
LANGUAGE plpgsql
AS $$
DECLARE
    r         transfer_run;
    v_plan    jsonb;
    v_preview  jsonb;
    v_findings jsonb;
    v_queue   text;
    v_refused text;
    v_needed  text[];
    v_stray   text;
    v_missing text[];
    v_cap     bigint;
    v_started jsonb;
BEGIN
    r := transfer__run_for(p_run, p_operator);
    PERFORM transfer__require_start_grants(r, p_operator);
    IF r.state <> 'previewed' THEN
        PERFORM transfer__wrong_state(p_run, r.state, 'execute', 'a previewed run');
    END IF;
    v_plan := transfer__plan(r);
    v_queue := v_plan -> 'source' ->> 'queue';
    IF r.preview_expires_at IS NOT NULL AND r.preview_expires_at < clock_timestamp() THEN
        RAISE EXCEPTION USING ERRCODE = 'AT003',
            MESSAGE = format('the preview of run %s expired at %s UTC: preview again', p_run,
                             to_char(r.preview_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')),
            DETAIL = jsonb_build_object('at', r.preview_expires_at)::text;
    END IF;
    IF p_plan_hash IS DISTINCT FROM coalesce(r.plan_hash, '') THEN
        RAISE EXCEPTION USING ERRCODE = 'AT004',
            -- Never the expected hash, in words or detail: echoing it shows the operator saw this preview.
            MESSAGE = format('the plan hash %s is not the one run %s was previewed with: preview again',
                             coalesce(p_plan_hash, ''), p_run),
            DETAIL = jsonb_build_object('given', coalesce(p_plan_hash, ''))::text;
    END IF;
    v_preview := coalesce(r.preview, '{}'::jsonb);
    v_findings := CASE WHEN jsonb_typeof(v_preview -> 'findings') = 'array' THEN v_preview -> 'findings'
                       ELSE '[]'::jsonb END;
    SELECT string_agg(format('%s (%s)', coalesce(f ->> 'code', ''), coalesce(f ->> 'words', '')), '; ' ORDER BY i)
    INTO v_refused
    FROM jsonb_array_elements(v_findings) WITH ORDINALITY AS x (f, i)
    WHERE f ->> 'kind' = 'refused';
    IF v_refused IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'AT005', MESSAGE = 'the preview refused this run: ' || v_refused,
            DETAIL = jsonb_build_object('words', v_refused)::text;
    END IF;
    SELECT coalesce(array_agg(coalesce(f ->> 'code', '') ORDER BY i), '{}') INTO v_needed
    FROM jsonb_array_elements(v_findings) WITH ORDINALITY AS x (f, i)
    WHERE f ->> 'kind' = 'needs_ack';
    SELECT a INTO v_stray
    FROM unnest(coalesce(p_acknowledged, '{}')) WITH ORDINALITY AS u (a, i)
    WHERE a IS NOT NULL AND NOT (a = ANY (v_needed))
    ORDER BY i
    LIMIT 1;
    IF v_stray IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'AT007',
            MESSAGE = format('the preview did not raise %s; acknowledge only its own codes', v_stray),
            DETAIL = jsonb_build_object('code', v_stray)::text;
    END IF;
    -- The words below name no caller's field or flag: each caller (the CLI, the API) says from the detail how to
    -- give what is missing in its own terms.
    SELECT array_agg(c ORDER BY i) INTO v_missing
    FROM unnest(v_needed) WITH ORDINALITY AS n (c, i)
    WHERE NOT (c = ANY (coalesce(p_acknowledged, '{}')));
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'AT006',
            MESSAGE = 'acknowledge these findings to run it: ' || array_to_string(v_missing, ', '),
            DETAIL = jsonb_build_object('codes', to_jsonb(v_missing))::text;
    END IF;
    IF (transfer__preview_flag(v_preview, 'needs_typed_confirmation') OR v_plan ->> 'mode' = 'move')
       AND p_typed_queue IS DISTINCT FROM v_queue THEN
        RAISE EXCEPTION USING ERRCODE = 'AT008',
            MESSAGE = format('type the source queue''s name to arm this run (%s)', v_queue)
                      || CASE WHEN p_typed_queue IS NULL THEN ''
                              ELSE format(': `%s` is not the source queue''s name', p_typed_queue) END,
            DETAIL = jsonb_build_object('expected', v_queue, 'typed', p_typed_queue)::text;
    END IF;
    IF transfer__preview_flag(v_preview, 'needs_cap_override') AND NOT coalesce(p_override_cap, false) THEN
        SELECT (s.value #>> '{}')::bigint INTO v_cap FROM setting s WHERE s.key = 'safety_cap';
        IF v_cap IS NULL THEN
            RAISE EXCEPTION 'setting safety_cap is missing: run `artemis-transfer migrate`';
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'AT009',
            MESSAGE = format('this run is over the safety cap of %s messages or of unknown size: override the cap '
                             'to run it', v_cap),
            DETAIL = jsonb_build_object('cap', v_cap)::text;
    END IF;
    UPDATE transfer_run
    SET confirmed = jsonb_build_object('plan_hash', p_plan_hash, 'acknowledged', to_jsonb(coalesce(p_acknowledged, '{}')),
                                       'typed_queue', p_typed_queue, 'override_cap', coalesce(p_override_cap, false),
                                       'by', p_operator),
        executed_at = now()
    WHERE id = p_run;
    v_started := transfer__start(r, v_plan, 'execute', p_operator, p_max_attempts);
    RETURN ('00000', format('run %s is queued', p_run), v_started)::transfer_action_result;
END;
$$;

CREATE OR REPLACE FUNCTION transfer__stop(p_run uuid, p_reason text, p_operator text)
RETURNS transfer_action_result
LANGUAGE plpgsql
AS $$
DECLARE
    r      transfer_run;
    v_stop jsonb;
BEGIN
    r := transfer__run_for(p_run, p_operator);
    PERFORM transfer__require_start_grants(r, p_operator);
    v_stop := transfer_run_request_stop(p_run,
                                        format('stopped by %s: %s', p_operator, coalesce(p_reason, 'operator request')));
    RETURN (
        '00000',
        CASE v_stop ->> 'stop'
            WHEN 'stopped' THEN format('run %s stopped', p_run)
            WHEN 'requested' THEN format('run %s: stop requested; the batch in flight finishes first', p_run)
            ELSE format('run %s had already ended: %s', p_run, v_stop ->> 'state')
        END,
        v_stop)::transfer_action_result;
END;
$$;

CREATE OR REPLACE FUNCTION transfer__resume(p_run uuid, p_operator text, p_max_attempts integer)
RETURNS transfer_action_result
LANGUAGE plpgsql
AS $$
DECLARE
    r         transfer_run;
    v_plan    jsonb;
    v_started jsonb;
BEGIN
    r := transfer__run_for(p_run, p_operator);
    PERFORM transfer__require_start_grants(r, p_operator);
    PERFORM transfer__resumable(r, 'resume');
    v_plan := transfer__plan(r);
    PERFORM transfer__clear_stop(p_run);
    v_started := transfer__start(r, v_plan, 'resume', p_operator, p_max_attempts);
    RETURN ('00000', format('run %s resumed', p_run), v_started)::transfer_action_result;
END;
$$;

CREATE OR REPLACE FUNCTION transfer__return(p_run uuid, p_operator text, p_max_attempts integer)
RETURNS transfer_action_result
LANGUAGE plpgsql
AS $$
DECLARE
    r         transfer_run;
    v_plan    jsonb;
    v_started jsonb;
BEGIN
    r := transfer__run_for(p_run, p_operator);
    PERFORM transfer__require(p_operator, 'message:move', r.source_cluster);
    PERFORM transfer__resumable(r, 'return to source');
    v_plan := transfer__plan(r);
    IF v_plan ->> 'mode' <> 'move' THEN
        RAISE EXCEPTION USING ERRCODE = 'AT011', MESSAGE = 'only a move has anything to return';
    END IF;
    IF (v_plan -> 'source' ->> 'cluster') = (v_plan -> 'target' ->> 'cluster')
       AND (v_plan -> 'source' ->> 'node') = (v_plan -> 'target' ->> 'node') THEN
        RAISE EXCEPTION USING ERRCODE = 'AT011',
            MESSAGE = 'a move on one node holds nothing in staging: what it moved is on the target queue, and the '
                      'rest is still on the source queue; to put messages back, preview a move from the target queue';
    END IF;
    PERFORM transfer__clear_stop(p_run);
    v_started := transfer__start(r, v_plan, 'return', p_operator, p_max_attempts);
    RETURN ('00000', format('run %s is returning', p_run), v_started)::transfer_action_result;
END;
$$;
