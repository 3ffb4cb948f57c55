-- ledger_clear: forgets what copy run $1 copied (its end).
DELETE FROM transfer_copy_ledger WHERE run_id = $1
