-- endpoint_insert: an endpoint of node $2 of cluster $1: Core URL $3, Jolokia URL $4, role $5 (primary or
-- backup), broker name $6.
INSERT INTO cluster_endpoint (cluster, node, core_url, jolokia_url, role, broker_name)
VALUES ($1, $2, $3, $4, $5, $6)
