-- setting_lock: every setting with who changed it last and when, locked until the transaction ends (a change
-- validates the whole set, so two changes at once are validated one after the other).
SELECT key, value, updated_at, updated_by FROM setting ORDER BY key FOR UPDATE
