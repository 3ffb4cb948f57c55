-- cluster_insert: registers cluster $1 with credentials reference $2; no row when the name is taken.
INSERT INTO cluster (name, credentials_ref) VALUES ($1, $2) ON CONFLICT DO NOTHING
