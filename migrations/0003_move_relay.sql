-- 0003: what a move keeps on its run while it relays (issue 6; SPEC §4, §7).
--
-- A move's durable progress lives on its run row, written only inside transactions fenced by the lease of the
-- run's one live job (jobs::lease::FencedTx), so a worker that lost its lease cannot touch it:
--
--   staging_queue  studio.transfer.<run id> on the source node once the run prepared it; kept after the run
--                  ends, so a staging queue on a broker can always be traced back to its run (orphans are the
--                  staging queues no run names).
--   relay          the relay's cursor, as JSON (transfer::relay::state::RelayState):
--                    in_doubt      staging message ids sent to the target whose source acknowledgement is not
--                                  yet known to have committed (SPEC §4.2 step 3). Settled from broker truth at
--                                  the next claim (I6).
--                    ids_next      for an id selection, how many ids the refills have handed to the broker.
--                    refill        a refill's recorded intent, written before the broker call (§4.1).
--                    exhausted     the source has nothing more that matches the frozen selection.
--                    waiting_since when the run began waiting for room on the target (capacity wait).
--   confirmed      what the operator confirmed at execute: the codes acknowledged, the typed queue name, the
--                  cap override (never a secret).
ALTER TABLE transfer_run
    ADD COLUMN staging_queue text,
    ADD COLUMN relay         jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN confirmed     jsonb,
    ADD COLUMN executed_at   timestamptz,
    ADD CONSTRAINT transfer_run_staging_name CHECK (
        staging_queue IS NULL OR staging_queue = 'studio.transfer.' || id::text);

-- Orphan listing asks "is there a run for this staging queue?".
CREATE UNIQUE INDEX transfer_run_staging_queue ON transfer_run (staging_queue) WHERE staging_queue IS NOT NULL;

-- "At most one active run per source queue on a node" (SPEC §7), enforced by the database: execute takes the
-- run from previewed to queued, and a second active run on the same source queue is refused here even when two
-- operators execute at the same instant.
CREATE UNIQUE INDEX transfer_run_one_active_per_source ON transfer_run (source_cluster, source_node, source_queue)
    WHERE state IN ('queued', 'running', 'waiting', 'returning');
