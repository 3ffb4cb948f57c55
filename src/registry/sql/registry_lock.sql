-- registry_lock: taken by a registration's transaction before it checks who holds its brokers, so two registrations
-- of the same brokers under two names cannot both pass the check (each waits for the other to commit). Readers and
-- runs are not blocked: the mode conflicts only with writes to cluster_node.
LOCK TABLE cluster_node IN SHARE ROW EXCLUSIVE MODE
