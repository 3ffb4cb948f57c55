-- The audit rows written before $1, at most $2 of them (oldest first, by the audit_by_time index).
DELETE FROM audit
WHERE id IN (SELECT id FROM audit WHERE at < $1 ORDER BY at LIMIT $2)
