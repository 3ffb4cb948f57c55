-- window_holders: the batches in doubt of the other runs (not $1) in target address $2's window, one row per
-- batch's mark (relay/in_doubt.rs): (run, where the batch starts in the window, how many ids it holds).
SELECT r.id AS run, (m -> 'window' ->> 'start')::bigint AS start, jsonb_array_length(m -> 'ids') AS size
FROM transfer_run r
CROSS JOIN LATERAL jsonb_array_elements(r.relay -> 'in_doubt') AS m
WHERE jsonb_array_length(coalesce(r.relay -> 'in_doubt', '[]'::jsonb)) > 0
  AND r.id <> $1
  AND (m -> 'window' ->> 'target') = $2
