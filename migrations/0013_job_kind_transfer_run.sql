-- A run's jobs are of kind 'transfer.run' (src/transfer/relay/mod.rs, KIND): they were 'transfer.move', a name from
-- when moves were the only runs, and it also ran copies and returns. The jobs already written take the new name, so
-- a worker of this build runs them; the start path writes it (transfer_first_job, sql/functions/runs.sql).
UPDATE job SET kind = 'transfer.run' WHERE kind = 'transfer.move';
