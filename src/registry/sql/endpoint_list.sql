-- endpoint_list: every endpoint, by cluster and node, primaries first ('primary' > 'backup').
SELECT cluster, node, core_url, jolokia_url, role, broker_name FROM cluster_endpoint
ORDER BY cluster, node, role DESC, core_url
