-- ledger_add: copy run $1 copied the source message ids $2 (one array insert; an id recorded already stays).
INSERT INTO transfer_copy_ledger (run_id, message_id) SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING
