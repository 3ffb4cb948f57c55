-- ledger_holding: of the source message ids $2, those copy run $1 has copied.
-- One index probe per id, whatever the planner believes of the table: with `message_id = ANY($2)` a plan made
-- while the ledger's statistics were those of a young run (a few hundred rows, all of one run) reads every row of
-- the run instead, and a copy's browse then costs the size of its ledger, every batch (docs/BENCHMARKS.md,
-- "Session 26"). The LIMIT keeps the lookup a probe the planner cannot turn into a join over the whole run.
SELECT wanted.id
FROM unnest($2::bigint[]) AS wanted(id)
CROSS JOIN LATERAL (
    SELECT FROM transfer_copy_ledger l WHERE l.run_id = $1 AND l.message_id = wanted.id LIMIT 1
) AS copied
