-- run_rate_samples: run $1's delivered count each time a batch changed it (run_rate_sample, migration 0016),
-- oldest first: its rate over time.
SELECT at, delivered FROM run_rate_sample WHERE run_id = $1 ORDER BY at, id
