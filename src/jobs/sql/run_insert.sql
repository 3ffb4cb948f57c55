-- run_insert: a new run $1 in state previewed (the transfer layer's preview makes runs; tests and the
-- engine's own probe runs use this).
INSERT INTO transfer_run (id, state, started_by) VALUES ($1, 'previewed', $2)
