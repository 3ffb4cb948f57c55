-- node_insert: node $2 of cluster $1, with broker NodeID $3 and primary broker name $4.
INSERT INTO cluster_node (cluster, name, node_id, broker_name) VALUES ($1, $2, $3, $4)
