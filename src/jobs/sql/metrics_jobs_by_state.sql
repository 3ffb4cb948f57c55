-- metrics_jobs_by_state: how many jobs are on record in each state.
SELECT state, count(*) FROM job GROUP BY state
