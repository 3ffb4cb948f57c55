-- slot_release: run $1 gives its `concurrent runs` slot back (it ended or stopped).
UPDATE run_slot SET run_id = NULL, taken_at = NULL WHERE run_id = $1
