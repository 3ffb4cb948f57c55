-- cluster_delete: removes cluster $1; its nodes and endpoints go with it (ON DELETE CASCADE).
DELETE FROM cluster WHERE name = $1
