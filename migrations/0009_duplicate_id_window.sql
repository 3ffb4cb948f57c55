-- The duplicate-id window of a target address (ADR 0010). A batch in doubt after a crash is sent again, and the
-- target's duplicate-id cache drops what already landed — only while the cache still holds the batch's ids. The
-- cache is per address on a broker, a ring of `id-cache-size` ids shared by every run that writes there. So every
-- run counts here the ids it is about to send into an address, in the fenced transaction that records them in
-- doubt; a run that would push another run's batch in doubt out of the ring waits until that batch is settled.
CREATE TABLE duplicate_id_window (
    -- `cluster/node/address` of the target.
    target     text PRIMARY KEY,
    -- Ids every run has counted into the address so far (a run's in-doubt batch records where it began).
    sent       bigint NOT NULL DEFAULT 0 CHECK (sent >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE duplicate_id_window IS
    'Per target address: how many duplicate ids the runs have sent into it, so none pushes another''s batch in doubt out of the broker''s id cache (ADR 0010)';

-- A batch looks for the other runs' batches in doubt on its address (relay/window.rs): only runs holding one.
CREATE INDEX transfer_run_in_doubt_window ON transfer_run ((relay -> 'window' ->> 'target'))
    WHERE jsonb_array_length(coalesce(relay -> 'in_doubt', '[]'::jsonb)) > 0;
