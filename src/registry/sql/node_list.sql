-- node_list: every node of every cluster, by cluster and name.
SELECT cluster, name, node_id, broker_name FROM cluster_node ORDER BY cluster, name
