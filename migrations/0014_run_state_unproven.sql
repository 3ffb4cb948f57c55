-- A run that ended but whose end the brokers could not prove is 'unproven' (issue 27): before, such a run said
-- 'succeeded', the word a proven run earns. Final, like 'succeeded' and 'partial' (its staging removed).
ALTER TABLE transfer_run DROP CONSTRAINT transfer_run_state_known;
ALTER TABLE transfer_run ADD CONSTRAINT transfer_run_state_known CHECK (state IN (
    'previewed', 'queued', 'running', 'waiting', 'returning',
    'succeeded', 'partial', 'unproven', 'stopped', 'interrupted', 'failed', 'returned'));
