-- node_holder: the registered cluster and node that already hold one of the brokers with NodeIDs $1 (a broker
-- belongs to one cluster: its NodeID, which management reports and a primary and its backup share, is its
-- identity, whatever URL reaches it); no row when none does.
SELECT cluster, name, node_id FROM cluster_node WHERE node_id = ANY($1) ORDER BY cluster, name LIMIT 1
