-- audit_insert: actor $1 did $2 to $3 with outcome $4 ('ok', 'refused', 'error') and detail $5.
INSERT INTO audit (actor, action, target, outcome, detail) VALUES ($1, $2, $3, $4, $5)
RETURNING id
