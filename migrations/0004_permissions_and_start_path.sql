-- 0004: permissions (SPEC §9), audit on both clusters, and the Studio start path as SQL functions (issue 7).
--
-- What this adds (docs/studio-integration.md has the caller's view, with psql examples):
--
--   transfer_grant           who may do what on which cluster; written by the Studio backend (or
--                            `artemis-transfer grant add|remove`)
--   transfer_has_grant       the one test of a grant: admin implies every permission, '*' every cluster
--   transfer_can_see         any grant on a cluster (or on '*') makes it visible; an invisible cluster answers
--                            as if it did not exist
--   transfer_missing_grant   what a move or copy from one cluster to another needs, and the first grant missing
--   audit.source_cluster,    the clusters an audited action concerns, so each cluster's audit trail shows it
--   audit.target_cluster     (filled from the run by a trigger when the writer names a run but no cluster)
--   transfer_audit_trail     one cluster's audit trail
--   transfer_run_start       starts (or resumes) a run with its next job: the one implementation, called by
--                            jobs::runs::start and by the functions below
--   transfer_run_request_stop  asks a run to stop: the one implementation, called by jobs::runs::request_stop
--   transfer_first_job       the job a run starts with (execute, resume, return): the one implementation
--   transfer_execute, transfer_stop, transfer_resume, transfer_return
--                            the operator's actions with every check and the audit, called by the Studio
--                            backend and by transfer::actions (the CLI): one implementation of both
--
-- Refusals are not exceptions. An exception rolls back the transaction that raised it, and with it the audit
-- row of the refusal, so the action functions catch what their checks raise and return it as a
-- `transfer_action_result` (sqlstate, message, detail), after writing the audit row:
--   sqlstate '00000'  done; message says what happened, detail carries the result (job id, sequence, …)
--   sqlstate 'AT0xx'  refused (our own class 'AT', listed below); message in words, detail as JSON
--   any other         an error of the database itself (audited as 'error'); message is Postgres's
-- The SQLSTATEs of class AT (stable; transfer::actions maps each to its ActionError variant):
--   AT000  the call itself is malformed (no operator, an unknown permission or mode)
--   AT001  no such run — or one whose source or target cluster the operator may not see (the same words)
--   AT002  the run is not in a state the action applies to            detail {state, action}
--   AT003  the preview expired                                         detail {at}
--   AT004  the plan hash is not the previewed one                      detail {given, expected}
--   AT005  the preview refused the run (refused findings, no plan)     detail {words}
--   AT006  needs-acknowledgement codes not acknowledged                detail {codes}
--   AT007  an acknowledgement of a code the preview did not raise      detail {code}
--   AT008  the typed confirmation is missing or wrong                  detail {expected, why}
--   AT009  over the safety cap (or of unknown size) without override   detail {cap}
--   AT010  another run is active on the source queue                   detail {queue}
--   AT011  not possible for this kind of run (copy not built; return of a same-node move or of a copy)
--   AT012  the operator lacks a permission                             detail {principal, permission, cluster}

-- ---------------------------------------------------------------------------------------------- transfer_grant

-- A grant: `principal` (the operator's name as the Studio backend and the CLI pass it) holds `permission` on
-- `cluster` (a registered cluster's name, or '*' for every cluster, present and future). Not a foreign key to
-- `cluster`: grants may be written before the cluster is registered and outlive its removal.
--   cluster:read   see the cluster: list it, list its orphans
--   message:read   copy from it (SPEC §9)
--   message:move   move from it, return to it, return its orphans
--   message:send   send to it (the target of a move or copy)
--   admin          every permission on the cluster; on '*', the admin commands (`admin …`, `grant …`) too
-- A cluster on which the principal holds no grant at all is invisible to it: it answers as if it did not exist.
CREATE TABLE transfer_grant (
    principal  text        NOT NULL,
    cluster    text        NOT NULL,
    permission text        NOT NULL,
    granted_by text        NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, cluster, permission),
    CONSTRAINT transfer_grant_principal_not_empty CHECK (principal <> ''),
    CONSTRAINT transfer_grant_cluster_plain CHECK (cluster = '*' OR cluster ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$'),
    CONSTRAINT transfer_grant_permission_known CHECK (
        permission IN ('cluster:read', 'message:read', 'message:move', 'message:send', 'admin')),
    CONSTRAINT transfer_grant_granted_by_not_empty CHECK (granted_by <> '')
);

-- transfer_has_grant(principal, cluster, permission): whether the principal holds the permission on the cluster,
-- directly, through a grant on '*', or through 'admin' (on the cluster or on '*'). Asked with cluster '*', only
-- grants on '*' count ("on every cluster").
--   SELECT transfer_has_grant('alice', 'west', 'message:send');
CREATE FUNCTION transfer_has_grant(p_principal text, p_cluster text, p_permission text)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_permission IS NULL
       OR p_permission NOT IN ('cluster:read', 'message:read', 'message:move', 'message:send', 'admin') THEN
        RAISE EXCEPTION USING ERRCODE = 'AT000',
            MESSAGE = format('%s is not a permission: use cluster:read, message:read, message:move, message:send '
                             'or admin', coalesce(quote_literal(p_permission), 'NULL'));
    END IF;
    RETURN EXISTS (
        SELECT 1 FROM transfer_grant g
        WHERE g.principal = p_principal
          AND (g.cluster = p_cluster OR g.cluster = '*')
          AND (g.permission = p_permission OR g.permission = 'admin'));
END;
$$;

-- transfer_can_see(principal, cluster): any grant on the cluster or on '*'.
CREATE FUNCTION transfer_can_see(p_principal text, p_cluster text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (
        SELECT 1 FROM transfer_grant g WHERE g.principal = p_principal AND (g.cluster = p_cluster OR g.cluster = '*'))
$$;

-- The words of a missing grant, the same as transfer::permissions::MissingGrant says them:
-- "operator alice lacks message:send on cluster west".
CREATE FUNCTION transfer_lacks_words(p_principal text, p_permission text, p_cluster text)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT format('operator %s lacks %s on %s', p_principal, p_permission,
                  CASE WHEN p_cluster = '*' THEN 'every cluster (*)' ELSE 'cluster ' || p_cluster END)
$$;

-- transfer_missing_grant(principal, mode, source cluster, target cluster): the first grant a run of `mode`
-- ('move' or 'copy') needs and the principal lacks (SPEC §9: a move needs message:move on the source, a copy
-- message:read; both need message:send on the target), or no row. Starting, stopping, resuming a run and each of
-- its batches need exactly this.
CREATE FUNCTION transfer_missing_grant(p_principal text, p_mode text, p_source text, p_target text)
RETURNS TABLE (permission text, cluster text)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('move', 'copy') THEN
        RAISE EXCEPTION USING ERRCODE = 'AT000',
            MESSAGE = format('%s is not a mode: use move or copy', coalesce(quote_literal(p_mode), 'NULL'));
    END IF;
    RETURN QUERY
        SELECT n.permission, n.cluster
        FROM (VALUES (1, CASE p_mode WHEN 'copy' THEN 'message:read' ELSE 'message:move' END, p_source),
                     (2, 'message:send', p_target)) AS n (ord, permission, cluster)
        WHERE NOT transfer_has_grant(p_principal, n.cluster, n.permission)
        ORDER BY n.ord
        LIMIT 1;
END;
$$;

-- ------------------------------------------------------------------------------------------------------ audit

-- The clusters an audited action concerns (SPEC §9: every action is audited on both clusters):
--   source_cluster  the run's source cluster; for an action on one cluster (orphan return, a grant), that
--                   cluster; '*' for an action on the whole deployment (admin jobs/rescue/prune, a grant on '*')
--   target_cluster  the run's target cluster (NULL when the action concerns one cluster only)
-- One cluster's trail: transfer_audit_trail(cluster), the rows naming it on either side or '*'.
ALTER TABLE audit
    ADD COLUMN source_cluster text,
    ADD COLUMN target_cluster text;

CREATE INDEX audit_by_source_cluster ON audit (source_cluster, id) WHERE source_cluster IS NOT NULL;
CREATE INDEX audit_by_target_cluster ON audit (target_cluster, id) WHERE target_cluster IS NOT NULL;

-- A writer that names a run but no cluster (the job-queue admin commands, written before this migration) gets
-- the run's clusters; one that names neither a run nor a cluster acted on the whole deployment ('*'). A run that
-- does not exist leaves both NULL: which clusters it concerned is unknown.
CREATE FUNCTION audit_fill_clusters()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_named text;
BEGIN
    IF NEW.source_cluster IS NOT NULL OR NEW.target_cluster IS NOT NULL THEN
        RETURN NEW;
    END IF;
    v_named := coalesce(substring(NEW.target FROM '^run[: ]([0-9A-Fa-f-]{36})$'),
                        NEW.detail ->> 'run', NEW.detail ->> 'run_id');
    IF v_named IS NULL THEN
        NEW.source_cluster := '*';
    ELSIF v_named ~ '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$' THEN
        SELECT r.source_cluster, r.target_cluster INTO NEW.source_cluster, NEW.target_cluster
        FROM transfer_run r WHERE r.id = v_named::uuid;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER audit_fill_clusters BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION audit_fill_clusters();

-- transfer_audit_trail(cluster, limit): the newest audit rows that concern `cluster`, newest first.
--   SELECT at, actor, action, target, outcome FROM transfer_audit_trail('west', 20);
CREATE FUNCTION transfer_audit_trail(p_cluster text, p_limit integer DEFAULT 100)
RETURNS SETOF audit
LANGUAGE sql STABLE
AS $$
    SELECT * FROM audit a
    WHERE a.source_cluster = p_cluster OR a.target_cluster = p_cluster OR a.source_cluster = '*'
    ORDER BY a.id DESC
    LIMIT p_limit
$$;

-- --------------------------------------------------------------------------------------- starting and stopping

-- transfer_run_start(run, kind, payload, started_by, max_attempts, run_at, priority): starts (or resumes) `run`
-- with a new pending job of `kind` and `payload` as its next job. The run is queued until a claim takes a
-- `concurrent runs` slot for it, then running. A resumed run continues its job sequence. Refused with AT001 when
-- there is no such run, AT002 when it is not previewed, stopped, interrupted or failed; a second active run on
-- the same source queue fails on transfer_run_one_active_per_source, a second live job on job_one_live_per_run.
-- Wakes the workers (NOTIFY transfer_job) when the transaction commits. jobs::runs::start calls this.
CREATE FUNCTION transfer_run_start(
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
        started_by = coalesce(p_started_by, started_by), updated_at = now()
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
-- flight (the live job, if any, is cancelled, the run Stopped and its slot released now), {"stop": "requested"}
-- when a batch is in flight (it finishes; the run stops at its next claim, whichever worker makes it), or
-- {"stop": "already_ended", "state": …} for a run that had ended or was never started. AT001: no such run.
-- jobs::runs::request_stop calls this.
CREATE FUNCTION transfer_run_request_stop(p_run uuid, p_reason text)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_state text;
    v_job   job;
BEGIN
    SELECT r.state INTO v_state FROM transfer_run r WHERE r.id = p_run FOR UPDATE;
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
    -- Nothing in flight (a paced, backing-off or queued job, or none): stop now, so a queued run stops too.
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

-- transfer_first_job(plan, staging queue, action): the job a run of `plan` starts with when `action` ('execute',
-- 'resume', 'return') starts it — the kind and payload of transfer::relay::Phase::job():
--   return                              {"phase": "return"}
--   a move between two queues of a node {"phase": "local_move"} (the broker's own move, no staging)
--   resume of a move that has staging   {"phase": "relay"}
--   any other move                      {"phase": "prepare"}
-- all of kind 'transfer.move'. A copy is refused (AT011) until copy runs are built: a later migration that builds
-- them replaces this function (CREATE OR REPLACE), and every start path follows.
CREATE FUNCTION transfer_first_job(p_plan jsonb, p_staging_queue text, p_action text)
RETURNS TABLE (kind text, payload jsonb)
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_phase text;
BEGIN
    IF p_action = 'return' THEN
        v_phase := 'return';
    ELSIF p_plan ->> 'mode' IS DISTINCT FROM 'move' THEN
        RAISE EXCEPTION USING ERRCODE = 'AT011',
            MESSAGE = 'copy runs are not built yet (issue 7); preview a move instead';
    ELSIF (p_plan -> 'source' ->> 'cluster') = (p_plan -> 'target' ->> 'cluster')
          AND (p_plan -> 'source' ->> 'node') = (p_plan -> 'target' ->> 'node') THEN
        v_phase := 'local_move';
    ELSIF p_action = 'resume' AND p_staging_queue IS NOT NULL THEN
        v_phase := 'relay';
    ELSE
        v_phase := 'prepare';
    END IF;
    kind := 'transfer.move';
    payload := jsonb_build_object('phase', v_phase);
    RETURN NEXT;
END;
$$;

-- ---------------------------------------------------------------------- the operator's actions: the checks

-- What every action function returns (see the head of this file).
CREATE TYPE transfer_action_result AS (sqlstate text, message text, detail jsonb);

-- Raises AT012 unless `principal` holds `permission` on `cluster`.
CREATE FUNCTION transfer__require(p_principal text, p_permission text, p_cluster text)
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
CREATE FUNCTION transfer__run_for(p_run uuid, p_operator text)
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
CREATE FUNCTION transfer__require_start_grants(r transfer_run, p_operator text)
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
CREATE FUNCTION transfer__wrong_state(p_run uuid, p_state text, p_action text, p_applies_to text)
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
CREATE FUNCTION transfer__plan(r transfer_run)
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
CREATE FUNCTION transfer__display(p_end jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT format('%s/%s/%s', p_end ->> 'cluster', p_end ->> 'node', p_end ->> 'queue')
$$;

-- A boolean of the stored preview, true when absent or not a boolean (the stricter reading).
CREATE FUNCTION transfer__preview_flag(p_preview jsonb, p_key text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN jsonb_typeof(p_preview -> p_key) = 'boolean' THEN (p_preview ->> p_key)::boolean ELSE true END
$$;

-- Starts the run with its first job for `action`; a second active run on the source queue is AT010. Returns the
-- result's detail: {"job": id, "seq": n}.
CREATE FUNCTION transfer__start(r transfer_run, p_plan jsonb, p_action text, p_operator text, p_max_attempts integer)
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

-- execute: every check of a confirmation, in this order (the first that fails is the answer): the run exists
-- and is visible; the operator holds what the run needs; it is Previewed; its plan is readable; the preview has
-- not expired; the plan hash is the previewed one; no finding refuses it; no acknowledgement of a code the
-- preview did not raise; every needs-acknowledgement code acknowledged; the source queue's name typed (a move,
-- over the cap, or of unknown size); the cap overridden when needed; a kind of run that can start. Then the
-- confirmation is recorded on the run and its first job queued.
CREATE FUNCTION transfer__execute(
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
    v_missing text;
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
            MESSAGE = format('the plan hash %s is not the one run %s was previewed with (%s): preview again',
                             coalesce(p_plan_hash, ''), p_run, coalesce(r.plan_hash, '')),
            DETAIL = jsonb_build_object('given', coalesce(p_plan_hash, ''), 'expected', coalesce(r.plan_hash, ''))::text;
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
    SELECT string_agg(c, ', ' ORDER BY i) INTO v_missing
    FROM unnest(v_needed) WITH ORDINALITY AS n (c, i)
    WHERE NOT (c = ANY (coalesce(p_acknowledged, '{}')));
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'AT006',
            MESSAGE = 'acknowledge these findings to run it (--ack <code>): ' || v_missing,
            DETAIL = jsonb_build_object('codes', v_missing)::text;
    END IF;
    IF transfer__preview_flag(v_preview, 'needs_typed_confirmation') OR v_plan ->> 'mode' = 'move' THEN
        IF p_typed_queue IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'AT008',
                MESSAGE = format('type the source queue''s name to arm this run (--confirm %s)', v_queue),
                DETAIL = jsonb_build_object('expected', v_queue, 'why', '')::text;
        ELSIF p_typed_queue <> v_queue THEN
            RAISE EXCEPTION USING ERRCODE = 'AT008',
                MESSAGE = format('type the source queue''s name to arm this run (--confirm %s): `%s` is not the '
                                 'source queue''s name', v_queue, p_typed_queue),
                DETAIL = jsonb_build_object('expected', v_queue,
                                            'why', format(': `%s` is not the source queue''s name', p_typed_queue))::text;
        END IF;
    END IF;
    IF transfer__preview_flag(v_preview, 'needs_cap_override') AND NOT coalesce(p_override_cap, false) THEN
        SELECT (s.value #>> '{}')::bigint INTO v_cap FROM setting s WHERE s.key = 'safety_cap';
        IF v_cap IS NULL THEN
            RAISE EXCEPTION 'setting safety_cap is missing: run `artemis-transfer migrate`';
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'AT009',
            MESSAGE = format('this run is over the safety cap of %s messages or of unknown size: pass '
                             '--override-cap to run it', v_cap),
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

CREATE FUNCTION transfer__stop(p_run uuid, p_reason text, p_operator text)
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

-- A stopped, interrupted or failed run, or AT002 for `action`.
CREATE FUNCTION transfer__resumable(r transfer_run, p_action text)
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
CREATE FUNCTION transfer__clear_stop(p_run uuid)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE transfer_run SET stop_requested = false, stop_reason = NULL
    WHERE id = p_run AND state IN ('stopped', 'interrupted', 'failed')
$$;

CREATE FUNCTION transfer__resume(p_run uuid, p_operator text, p_max_attempts integer)
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

CREATE FUNCTION transfer__return(p_run uuid, p_operator text, p_max_attempts integer)
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

-- ------------------------------------------------------------------ the operator's actions: audited results

-- The actor of an audit row: the operator, or — when the caller named none — the database role that called.
CREATE FUNCTION transfer__actor(p_operator text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN coalesce(p_operator, '') = '' THEN format('%s (no operator named)', session_user)
                ELSE p_operator END
$$;

-- Writes the audit row of `action` on run `run` with its result (the run's clusters on both sides) and returns
-- the result. ok: {"result": detail}; refused: {"reason", "sqlstate", "detail"}; error: {"error", "sqlstate"}.
CREATE FUNCTION transfer__audited(p_operator text, p_action text, p_run uuid, p_result transfer_action_result)
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
CREATE FUNCTION transfer__caught(p_sqlstate text, p_message text, p_detail text)
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

-- An operator named, or AT000.
CREATE FUNCTION transfer__operator_named(p_operator text)
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

-- transfer_execute(run, plan hash, acknowledged codes, typed queue name, cap override, operator [, max attempts]):
-- executes a Previewed run for `operator` with the confirmation they gave. Audited, done or refused.
--   SELECT * FROM transfer_execute('…run id…', '…plan hash…', ARRAY['last-value'], 'orders', false, 'alice');
-- `max_attempts` is the retry budget of the run's first job (its successors take the worker's retry.max_attempts).
CREATE FUNCTION transfer_execute(
    p_run uuid, p_plan_hash text, p_acknowledged text[], p_typed_queue text, p_override_cap boolean,
    p_operator text, p_max_attempts integer DEFAULT 10)
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
        v_result := transfer__execute(p_run, p_plan_hash, p_acknowledged, p_typed_queue, p_override_cap, p_operator,
                                      p_max_attempts);
    EXCEPTION WHEN OTHERS THEN
        -- Everything the block did is rolled back; the audit row below is not.
        GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
        v_result := transfer__caught(v_state, v_message, v_detail);
    END;
    RETURN transfer__audited(p_operator, 'execute', p_run, v_result);
END;
$$;

-- transfer_stop(run, reason, operator): asks a run to stop (the batch in flight finishes first). Needs what
-- starting the run needed. Audited.
--   SELECT * FROM transfer_stop('…run id…', 'maintenance window', 'alice');
CREATE FUNCTION transfer_stop(p_run uuid, p_reason text, p_operator text)
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
        v_result := transfer__stop(p_run, p_reason, p_operator);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
        v_result := transfer__caught(v_state, v_message, v_detail);
    END;
    RETURN transfer__audited(p_operator, 'stop', p_run, v_result);
END;
$$;

-- transfer_resume(run, operator [, max attempts]): resumes a stopped, interrupted or failed run from where it
-- stopped. Needs what starting the run needed. Audited.
--   SELECT * FROM transfer_resume('…run id…', 'alice');
CREATE FUNCTION transfer_resume(p_run uuid, p_operator text, p_max_attempts integer DEFAULT 10)
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
        v_result := transfer__resume(p_run, p_operator, p_max_attempts);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
        v_result := transfer__caught(v_state, v_message, v_detail);
    END;
    RETURN transfer__audited(p_operator, 'resume', p_run, v_result);
END;
$$;

-- transfer_return(run, operator [, max attempts]): returns what a stopped, interrupted or failed move holds in
-- staging to the source queue (SPEC §4.5). Needs message:move on the source cluster. Audited.
--   SELECT * FROM transfer_return('…run id…', 'alice');
CREATE FUNCTION transfer_return(p_run uuid, p_operator text, p_max_attempts integer DEFAULT 10)
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
        v_result := transfer__return(p_run, p_operator, p_max_attempts);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
        v_result := transfer__caught(v_state, v_message, v_detail);
    END;
    RETURN transfer__audited(p_operator, 'return', p_run, v_result);
END;
$$;
