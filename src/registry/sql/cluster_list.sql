-- cluster_list: every registered cluster, by name.
SELECT name, credentials_ref FROM cluster ORDER BY name
