-- run_rate_samples: run $1's delivered count, the last of each second a batch changed it (run_rate_sample,
-- migrations 0016 and 0017), oldest first: its rate over time.
SELECT at, delivered FROM run_rate_sample WHERE run_id = $1 ORDER BY at, id
