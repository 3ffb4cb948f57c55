-- metrics_slots_taken: how many execution slots a run holds now. The slot table is filled in advance (one row per
-- slot up to the cap), so a slot is taken when it names a run, not when it exists.
SELECT count(*) FROM run_slot WHERE run_id IS NOT NULL
