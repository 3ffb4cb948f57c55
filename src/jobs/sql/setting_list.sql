-- setting_list: every setting.
SELECT key, value FROM setting ORDER BY key
