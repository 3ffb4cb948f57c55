-- window_holders: the other runs (not $1) with a batch in doubt in target address $2's window: (run, where their
-- batch starts in the window, how many ids it holds).
SELECT id AS run, (relay -> 'window' ->> 'start')::bigint AS start, jsonb_array_length(relay -> 'in_doubt') AS size
FROM transfer_run
WHERE (relay -> 'window' ->> 'target') = $2 AND id <> $1
  AND jsonb_array_length(coalesce(relay -> 'in_doubt', '[]'::jsonb)) > 0
