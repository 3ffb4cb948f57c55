-- window_advance: $2 more ids were sent into target address $1's window.
UPDATE duplicate_id_window SET sent = sent + $2 WHERE target = $1
