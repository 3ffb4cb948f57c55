-- grant_admin_exists: whether anybody holds admin on '*' (until then grants are open: a fresh database's bootstrap).
SELECT EXISTS (SELECT 1 FROM transfer_grant WHERE cluster = '*' AND permission = 'admin')
