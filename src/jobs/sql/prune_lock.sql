-- prune_lock: wait for the retention prune's advisory lock, held until the transaction ends (admin prune: the
-- operator asked for it, so it waits for a scheduled prune of another replica to finish instead of skipping).
SELECT pg_advisory_xact_lock(hashtextextended('artemis-transfer retention prune', 0))
