-- What a run holds in doubt becomes one mark per batch (ADR 0011, "Two batches in flight";
-- src/transfer/relay/in_doubt.rs): `relay.in_doubt` was one list of ids, with the batch's place in its target
-- address's duplicate-id window beside it in `relay.window`; it is now a list of marks, each a batch's ids with
-- its own window: [{"ids": [...], "window": {...}}]. An empty list still means nothing is in doubt. It converts
-- only rows of the old shape, so it can run again (tests/jobs/schema.rs runs it on a row it wrote the old way).
UPDATE transfer_run
SET relay = (relay - 'window') || jsonb_build_object(
        'in_doubt',
        CASE WHEN jsonb_array_length(relay -> 'in_doubt') > 0
            THEN jsonb_build_array(jsonb_build_object(
                'ids', relay -> 'in_doubt',
                'window', coalesce(relay -> 'window', 'null'::jsonb)))
            ELSE '[]'::jsonb
        END)
WHERE jsonb_typeof(relay -> 'in_doubt') = 'array'
  AND (jsonb_array_length(relay -> 'in_doubt') = 0 OR jsonb_typeof(relay -> 'in_doubt' -> 0) = 'number');

-- A batch looks for the other runs' batches in doubt on its address (window_holders.sql): the window's target is
-- inside each mark now, so the index holds the runs with anything in doubt, which are few.
DROP INDEX IF EXISTS transfer_run_in_doubt_window;
CREATE INDEX IF NOT EXISTS transfer_run_in_doubt ON transfer_run (id)
    WHERE jsonb_array_length(coalesce(relay -> 'in_doubt', '[]'::jsonb)) > 0;
