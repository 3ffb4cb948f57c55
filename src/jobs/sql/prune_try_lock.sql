-- prune_try_lock: the retention prune's advisory lock if it is free (true), held until the transaction ends;
-- false when another replica is pruning now, and the scheduled prune skips this round.
SELECT pg_try_advisory_xact_lock(hashtextextended('artemis-transfer retention prune', 0))
