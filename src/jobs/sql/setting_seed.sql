-- setting_seed: default value $2 for setting $1, unless the setting already has a value.
INSERT INTO setting (key, value, updated_by) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING
