-- setting_rows: every setting with who changed it last and when.
SELECT key, value, updated_at, updated_by FROM setting ORDER BY key
