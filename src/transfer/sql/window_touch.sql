-- window_touch: target address $1's duplicate-id window, made on first use and locked until the transaction ends;
-- how many ids have been sent into it.
INSERT INTO duplicate_id_window (target) VALUES ($1)
ON CONFLICT (target) DO UPDATE SET updated_at = now()
RETURNING sent
