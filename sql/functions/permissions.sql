-- Grants (docs/permissions.md; table transfer_grant): the one test of a grant, what a cluster's visibility is, and what a run
-- needs.

-- transfer_has_grant(principal, cluster, permission): whether the principal holds the permission on the cluster,
-- directly, through a grant on '*', or through 'admin' (on the cluster or on '*'). Asked with cluster '*', only
-- grants on '*' count ("on every cluster").
--   SELECT transfer_has_grant('alice', 'west', 'message:send');
CREATE OR REPLACE FUNCTION transfer_has_grant(p_principal text, p_cluster text, p_permission text)
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
CREATE OR REPLACE FUNCTION transfer_can_see(p_principal text, p_cluster text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (
        SELECT 1 FROM transfer_grant g WHERE g.principal = p_principal AND (g.cluster = p_cluster OR g.cluster = '*'))
$$;

-- The words of a missing grant, the same as transfer::permissions::MissingGrant says them:
-- "operator alice lacks message:send on cluster west".
CREATE OR REPLACE FUNCTION transfer_lacks_words(p_principal text, p_permission text, p_cluster text)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT format('operator %s lacks %s on %s', p_principal, p_permission,
                  CASE WHEN p_cluster = '*' THEN 'every cluster (*)' ELSE 'cluster ' || p_cluster END)
$$;

-- transfer_missing_grant(principal, mode, source cluster, target cluster): the first grant a run of `mode`
-- ('move' or 'copy') needs and the principal lacks (docs/permissions.md: a move needs message:move on the source, a copy
-- message:read; both need message:send on the target), or no row. Starting, stopping, resuming a run and each of
-- its batches need exactly this.
CREATE OR REPLACE FUNCTION transfer_missing_grant(p_principal text, p_mode text, p_source text, p_target text)
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
