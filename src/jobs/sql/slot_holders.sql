-- slot_holders: the runs that hold a slot now.
SELECT run_id FROM run_slot WHERE run_id IS NOT NULL ORDER BY slot
