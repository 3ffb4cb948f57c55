-- setting_set: setting $1 becomes $2, changed by $3; the row as it is now.
INSERT INTO setting (key, value, updated_by) VALUES ($1, $2, $3)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_by = excluded.updated_by, updated_at = now()
RETURNING key, value, updated_at, updated_by
