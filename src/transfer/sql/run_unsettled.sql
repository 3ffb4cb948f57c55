-- run_unsettled: whether run $1 has a batch in doubt or a refill whose outcome is unknown (its relay cursor), which
-- must be settled before it stops.
SELECT jsonb_array_length(coalesce(relay -> 'in_doubt', '[]'::jsonb)) > 0
    OR coalesce(relay -> 'refill', 'null'::jsonb) <> 'null'::jsonb
FROM transfer_run WHERE id = $1
