-- ledger_size: how many source messages copy run $1 has copied.
SELECT count(*) FROM transfer_copy_ledger WHERE run_id = $1
