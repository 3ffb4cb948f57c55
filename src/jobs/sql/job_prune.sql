-- job_prune: delete finished jobs that finished before $1, of runs that ended with their staging removed
-- (succeeded, partial, returned). A run that may still hold staging keeps its whole history.
DELETE FROM job j
USING transfer_run r
WHERE j.run_id = r.id
  AND j.finished_at < $1
  AND r.state IN ('succeeded', 'partial', 'returned')
