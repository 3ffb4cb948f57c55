-- The operator's actions as the Studio backend and transfer::actions (the CLI, the API) call them: transfer_execute,
-- transfer_stop, transfer_resume, transfer_return (docs/studio-integration.md has the caller's view).
--
-- Refusals are not exceptions. An exception rolls back the transaction that raised it, and with it the audit
-- row of the refusal, so the action functions catch what their checks raise and return it as a
-- `transfer_action_result` (sqlstate, message, detail), after writing the audit row:
--   sqlstate '00000'  done; message says what happened, detail carries the result (job id, sequence, …)
--   sqlstate 'AT0xx'  refused (our own class 'AT', listed below); detail as JSON says what is wrong to a program,
--                     message to a person, in words that name no caller's flag or field (each caller — the CLI,
--                     the API — says in its own terms how to give what is missing)
--   any other         an error of the database itself (audited as 'error'); message is Postgres's
-- The SQLSTATEs of class AT (stable; transfer::actions maps each to its ActionError variant):
--   AT000  the call itself is malformed (no operator, an unknown permission or mode)
--   AT001  no such run — or one whose source or target cluster the operator may not see (the same words)
--   AT002  the run is not in a state the action applies to            detail {state, action}
--   AT003  the preview expired                                         detail {at}
--   AT004  the plan hash is not the previewed one                      detail {given} (never the expected hash)
--   AT005  the preview refused the run (refused findings, no plan)     detail {words}
--   AT006  needs-acknowledgement codes not acknowledged                detail {codes: [code, …]}
--   AT007  an acknowledgement of a code the preview did not raise      detail {code}
--   AT008  the typed confirmation is missing or wrong                  detail {expected, typed (null: none)}
--   AT009  over the safety cap (or of unknown size) without override   detail {cap}
--   AT010  another run is active on the source queue                   detail {queue}
--   AT011  not possible for this kind of run (a return of a copy or of a move on one node)
--   AT012  the operator lacks a permission                             detail {principal, permission, cluster}

-- The actor of an audit row: the operator, or — when the caller named none — the database role that called.
CREATE OR REPLACE FUNCTION transfer__actor(p_operator text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN coalesce(p_operator, '') = '' THEN format('%s (no operator named)', session_user)
                ELSE p_operator END
$$;

-- Writes the audit row of `action` on run `run` with its result (the run's clusters on both sides) and returns
-- the result. ok: {"result": detail}; refused: {"reason", "sqlstate", "detail"}; error: {"error", "sqlstate"}.
CREATE OR REPLACE FUNCTION transfer__audited(p_operator text, p_action text, p_run uuid, p_result transfer_action_result)
RETURNS transfer_action_result
LANGUAGE plpgsql
AS $$
DECLARE
    v_outcome text;
    v_detail  jsonb;
BEGIN
    IF p_result.sqlstate = '00000' THEN
        v_outcome := 'ok';
        v_detail := jsonb_build_object('result', p_result.detail);
    ELSIF p_result.sqlstate LIKE 'AT%' THEN
        v_outcome := 'refused';
        v_detail := jsonb_build_object('reason', p_result.message, 'sqlstate', p_result.sqlstate,
                                       'detail', p_result.detail);
    ELSE
        v_outcome := 'error';
        v_detail := jsonb_build_object('error', p_result.message, 'sqlstate', p_result.sqlstate);
    END IF;
    INSERT INTO audit (actor, action, target, outcome, detail, source_cluster, target_cluster)
    SELECT transfer__actor(p_operator), p_action, format('run:%s', p_run), v_outcome, v_detail,
           r.source_cluster, r.target_cluster
    FROM (SELECT 1) AS one
    LEFT JOIN transfer_run r ON r.id = p_run;
    RETURN p_result;
END;
$$;

-- What an exception raised by a check becomes: its SQLSTATE, its words, its detail (JSON for class AT).
CREATE OR REPLACE FUNCTION transfer__caught(p_sqlstate text, p_message text, p_detail text)
RETURNS transfer_action_result
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_detail jsonb;
BEGIN
    IF p_sqlstate LIKE 'AT%' THEN
        v_detail := coalesce(nullif(p_detail, '')::jsonb, '{}'::jsonb);
    ELSE
        v_detail := jsonb_build_object('detail', nullif(p_detail, ''));
    END IF;
    RETURN (p_sqlstate, p_message, v_detail)::transfer_action_result;
END;
$$;

-- One action as each entry point below runs it: checks that an operator is named, does the action (its checks
-- raise), turns what they raised into a result, and audits the result. The catch is here once so that the four
-- actions cannot drift in what they roll back and what they audit. Each argument after `p_operator` is used by
-- the actions that take it (the entry points' own parameters) and is null for the others.
CREATE OR REPLACE FUNCTION transfer__act(
    p_action text, p_run uuid, p_operator text,
    p_reason text DEFAULT NULL, p_plan_hash text DEFAULT NULL, p_acknowledged text[] DEFAULT NULL,
    p_typed_queue text DEFAULT NULL, p_override_cap boolean DEFAULT NULL, p_max_attempts integer DEFAULT NULL)
RETURNS transfer_action_result
LANGUAGE plpgsql
AS $$
DECLARE
    v_result  transfer_action_result;
    v_state   text;
    v_message text;
    v_detail  text;
BEGIN
    BEGIN
        PERFORM transfer__operator_named(p_operator);
        IF p_action = 'execute' THEN
            v_result := transfer__execute(p_run, p_plan_hash, p_acknowledged, p_typed_queue, p_override_cap,
                                          p_operator, p_max_attempts);
        ELSIF p_action = 'stop' THEN
            v_result := transfer__stop(p_run, p_reason, p_operator);
        ELSIF p_action = 'resume' THEN
            v_result := transfer__resume(p_run, p_operator, p_max_attempts);
        ELSIF p_action = 'return' THEN
            v_result := transfer__return(p_run, p_operator, p_max_attempts);
        ELSE
            RAISE EXCEPTION 'transfer__act: no action %', p_action USING ERRCODE = 'AT000';
        END IF;
    EXCEPTION WHEN OTHERS THEN
        -- Everything the block did is rolled back; the audit row below is not.
        GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
        v_result := transfer__caught(v_state, v_message, v_detail);
    END;
    RETURN transfer__audited(p_operator, p_action, p_run, v_result);
END;
$$;

-- transfer_execute(run, plan hash, acknowledged codes, typed queue name, cap override, operator [, max attempts]):
-- executes a Previewed run for `operator` with the confirmation they gave. Audited, done or refused.
--   SELECT * FROM transfer_execute('…run id…', '…plan hash…', ARRAY['last-value'], 'orders', false, 'alice');
-- `max_attempts` is the retry budget of the run's first job (its successors take the worker's retry.max_attempts).
CREATE OR REPLACE FUNCTION transfer_execute(
    p_run uuid, p_plan_hash text, p_acknowledged text[], p_typed_queue text, p_override_cap boolean,
    p_operator text, p_max_attempts integer DEFAULT 10)
RETURNS transfer_action_result
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN transfer__act('execute', p_run, p_operator, p_plan_hash => p_plan_hash, p_acknowledged => p_acknowledged,
                         p_typed_queue => p_typed_queue, p_override_cap => p_override_cap,
                         p_max_attempts => p_max_attempts);
END;
$$;

-- transfer_stop(run, reason, operator): asks a run to stop (the batch in flight finishes first). Needs what
-- starting the run needed. Audited.
--   SELECT * FROM transfer_stop('…run id…', 'maintenance window', 'alice');
CREATE OR REPLACE FUNCTION transfer_stop(p_run uuid, p_reason text, p_operator text)
RETURNS transfer_action_result
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN transfer__act('stop', p_run, p_operator, p_reason => p_reason);
END;
$$;

-- transfer_resume(run, operator [, max attempts]): resumes a stopped, interrupted or failed run from where it
-- stopped. Needs what starting the run needed. Audited.
--   SELECT * FROM transfer_resume('…run id…', 'alice');
CREATE OR REPLACE FUNCTION transfer_resume(p_run uuid, p_operator text, p_max_attempts integer DEFAULT 10)
RETURNS transfer_action_result
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN transfer__act('resume', p_run, p_operator, p_max_attempts => p_max_attempts);
END;
$$;

-- transfer_return(run, operator [, max attempts]): returns what a stopped, interrupted or failed move holds in
-- staging to the source queue (docs/guarantees.md, "Stop, resume, return"). Needs message:move on the source cluster. Audited.
--   SELECT * FROM transfer_return('…run id…', 'alice');
CREATE OR REPLACE FUNCTION transfer_return(p_run uuid, p_operator text, p_max_attempts integer DEFAULT 10)
RETURNS transfer_action_result
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN transfer__act('return', p_run, p_operator, p_max_attempts => p_max_attempts);
END;
$$;
