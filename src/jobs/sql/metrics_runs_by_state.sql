-- metrics_runs_by_state: how many runs are on record in each state.
SELECT state, count(*) FROM transfer_run GROUP BY state
