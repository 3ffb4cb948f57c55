-- Copy (SPEC §5): the ledger of source messages a copy run has committed on the target.
--
-- A copy browses the source and cannot resume a browser at a position: a continuation (a new time slice, or the
-- job after a crash) browses from the head again and skips what the ledger holds. The relay writes one array
-- insert per batch, in the same fenced transaction as the run's counters, after the target's commit; a crash
-- between the two is absorbed by the target's duplicate-id cache (each message's duplicate id is
-- `studio:<run>:<source message id>`), and the next batch records it.
--
-- The rows of a run are deleted when it finishes (Succeeded, Partial); a Stopped, Interrupted or Failed copy keeps
-- them, so a resume carries on without sending anything twice. Pruning a run deletes them with it.
CREATE TABLE transfer_copy_ledger (
    run_id     uuid   NOT NULL REFERENCES transfer_run (id) ON DELETE CASCADE,
    -- The source message's id (`messageID` on the source broker: stable while it stays there).
    message_id bigint NOT NULL,
    PRIMARY KEY (run_id, message_id)
);

-- Copy runs start: transfer_first_job (0004) learns the copy's phase. A copy has no staging: execute and resume
-- both start a time slice of browsing ({"phase": "copy_slice"}), the ledger saying what is done; a copy has
-- nothing to return (AT011).
CREATE OR REPLACE FUNCTION transfer_first_job(p_plan jsonb, p_staging_queue text, p_action text)
RETURNS TABLE (kind text, payload jsonb)
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_phase text;
BEGIN
    IF p_plan ->> 'mode' = 'copy' THEN
        IF p_action = 'return' THEN
            RAISE EXCEPTION USING ERRCODE = 'AT011',
                MESSAGE = 'a copy has nothing to return: the source still holds every message it copied';
        END IF;
        v_phase := 'copy_slice';
    ELSIF p_plan ->> 'mode' IS DISTINCT FROM 'move' THEN
        RAISE EXCEPTION USING ERRCODE = 'AT011',
            MESSAGE = format('a run of mode %s cannot start', coalesce(p_plan ->> 'mode', 'unknown'));
    ELSIF p_action = 'return' THEN
        v_phase := 'return';
    ELSIF (p_plan -> 'source' ->> 'cluster') = (p_plan -> 'target' ->> 'cluster')
          AND (p_plan -> 'source' ->> 'node') = (p_plan -> 'target' ->> 'node') THEN
        v_phase := 'local_move';
    ELSIF p_action = 'resume' AND p_staging_queue IS NOT NULL THEN
        v_phase := 'relay';
    ELSE
        v_phase := 'prepare';
    END IF;
    kind := 'transfer.move';
    payload := jsonb_build_object('phase', v_phase);
    RETURN NEXT;
END;
$$;
