-- functions_lock: waits for advisory lock $1, held until the transaction ends: one replica at a time applies
-- sql/functions/ (two concurrent CREATE OR REPLACE of one function fail with "tuple concurrently updated").
SELECT pg_advisory_xact_lock($1)
