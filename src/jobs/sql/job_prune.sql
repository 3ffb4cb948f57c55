-- job_prune: delete jobs that finished before $1, of runs that ended with their staging removed (succeeded,
-- partial, unproven, returned) but are themselves still kept (they ended after $1; older ones go whole with run_prune).
-- A run that may still hold staging, or may be resumed, keeps its whole history.
DELETE FROM job j
USING transfer_run r
WHERE j.run_id = r.id
  AND j.finished_at < $1
  AND r.state IN ('succeeded', 'partial', 'unproven', 'returned')
