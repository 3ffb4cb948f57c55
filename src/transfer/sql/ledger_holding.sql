-- ledger_holding: of the source message ids $2, those copy run $1 has copied.
SELECT message_id FROM transfer_copy_ledger WHERE run_id = $1 AND message_id = ANY($2)
