-- The audit's clusters (docs/permissions.md: every action is audited on both clusters) and one cluster's trail. The trigger
-- itself (audit_fill_clusters BEFORE INSERT ON audit) is created by migration 0004.

-- Every row gets detail.via from the connection's artemis_transfer.via setting, when set. A writer that names a run
-- but no cluster (the job-queue admin commands) gets
-- the run's clusters; one that names neither a run nor a cluster acted on the whole deployment ('*'). A run that
-- does not exist leaves both NULL: which clusters it concerned is unknown.
CREATE OR REPLACE FUNCTION audit_fill_clusters()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_named text;
    v_via   text := nullif(current_setting('artemis_transfer.via', true), '');
BEGIN
    -- The way the act came in, when the connection says (the console's pool sets artemis_transfer.via = 'console'
    -- at connect, ADR 0014): the SQL action functions write their own rows, so only the connection can tell.
    IF v_via IS NOT NULL AND NOT NEW.detail ? 'via' THEN
        NEW.detail := NEW.detail || jsonb_build_object('via', v_via);
    END IF;
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

-- transfer_audit_trail(cluster, limit): the newest audit rows that concern `cluster`, newest first.
--   SELECT at, actor, action, target, outcome FROM transfer_audit_trail('west', 20);
CREATE OR REPLACE FUNCTION transfer_audit_trail(p_cluster text, p_limit integer DEFAULT 100)
RETURNS SETOF audit
LANGUAGE sql STABLE
AS $$
    SELECT * FROM audit a
    WHERE a.source_cluster = p_cluster OR a.target_cluster = p_cluster OR a.source_cluster = '*'
    ORDER BY a.id DESC
    LIMIT p_limit
$$;
