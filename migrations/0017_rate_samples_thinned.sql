-- A run's rate samples, thinned (issue 30): at most one a run a second. Migration 0016 wrote one row each time a
-- batch changed `delivered` — 500 rows for a move of 100,000 in batches of 200, 5,000 at a batch of 20 — while the
-- console's chart and `GET /runs/{run}/rate` draw at most 120 points. A sample now stands for one second of the
-- database's clock (`at_second`, whole seconds since the epoch): a change within the second of the run's latest
-- sample updates that row (its count and instant, run_rate_sample in sql/functions/runs.sql), the next second adds
-- a row. The chart and the rate read the samples as before.
ALTER TABLE run_rate_sample ADD COLUMN at_second bigint;
UPDATE run_rate_sample SET at_second = floor(extract(epoch FROM at))::bigint;

-- The samples already written: each run keeps the last of each second.
DELETE FROM run_rate_sample s
USING run_rate_sample later
WHERE later.run_id = s.run_id AND later.at_second = s.at_second AND (later.at, later.id) > (s.at, s.id);

ALTER TABLE run_rate_sample
    ALTER COLUMN at_second SET DEFAULT floor(extract(epoch FROM now()))::bigint,
    ALTER COLUMN at_second SET NOT NULL,
    ADD CONSTRAINT run_rate_sample_one_a_second UNIQUE (run_id, at_second);

-- The unique key finds a run's samples; without an index on `at`, the update of a second's row can be a HOT update.
DROP INDEX run_rate_sample_by_run;
