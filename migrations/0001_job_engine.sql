-- 0001: the durable job engine (issue 5; SPEC §1, §7, §8).
--
-- Our own tables, not apalis-postgres (docs/adr/0002-own-job-tables-not-apalis-postgres.md). Forward-only: a later change is a new
-- numbered file, never an edit of this one.
--
-- Tables:
--   transfer_run  the minimal run row the engine needs (the transfer layer extends it in its own migrations)
--   job           one row per relay batch; at most one live row per run (single-flight, SPEC §7 I4)
--   run_slot      the global `concurrent runs` cap: a run holds one slot from its start until it stops or ends
--   setting       SPEC §8 settings, readable at runtime; defaults come from config/default.toml via `migrate`
--   run_event     what happened to a run that an operator should see (a lease that expired, a stop, an end)
--   audit         every admin or operator action: who, what, when, outcome
--   node_budget   the per-node token buckets behind transfer_node_permit(node, cost)
--
-- States are text with CHECK constraints rather than Postgres enums, so a later migration can add one with a
-- plain ALTER TABLE … DROP/ADD CONSTRAINT inside its transaction.

-- ------------------------------------------------------------------------------------------------ transfer_run

-- Run states (SPEC §7), mirrored by `jobs::model::RunState`:
--   previewed    created by a preview; nothing touched a broker. Moved to queued by jobs::runs::start.
--   queued       its first job is enqueued, but every `concurrent runs` slot is held by another run. The claim
--                that takes a free slot for it moves it to running.
--   running      holds a slot; a job is pending or in flight.
--   waiting      holds a slot; waiting for the target to have room (set by the transfer layer).
--   returning    holds a slot; putting staged messages back (set by the transfer layer).
--   succeeded, partial, returned
--                ended; staging removed; slot released. Final.
--   stopped      an operator stop, an admin cancel, a withdrawn permission or a capacity wait that ran out;
--                slot released; resumable (jobs::runs::start again).
--   interrupted  the retry budget of a job was spent (transient errors, or workers that died holding it);
--                last_error says why in words; slot released; resumable.
--   failed       a refusal discovered mid-run; slot released; resumable once fixed.
CREATE TABLE transfer_run (
    id             uuid        PRIMARY KEY,
    state          text        NOT NULL DEFAULT 'previewed',
    -- A stop is stored, not signalled: a worker that missed the request still sees it at its next claim.
    stop_requested boolean     NOT NULL DEFAULT false,
    stop_reason    text,
    last_error     text,
    counters       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    started_by     text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    ended_at       timestamptz,
    CONSTRAINT transfer_run_state_known CHECK (state IN (
        'previewed', 'queued', 'running', 'waiting', 'returning',
        'succeeded', 'partial', 'stopped', 'interrupted', 'failed', 'returned')),
    CONSTRAINT transfer_run_stop_has_reason CHECK (NOT stop_requested OR stop_reason IS NOT NULL)
)
-- Counters are rewritten after every batch: leave room on each page so the new row version stays on it (HOT).
WITH (fillfactor = 80);

-- ------------------------------------------------------------------------------------------------------- job

-- Job states, mirrored by `jobs::model::JobState`:
--   pending    waiting for run_at (new, paced, snoozed, or backing off after a transient error). Claimed by
--              job_claim once run_at has passed and its run holds (or can take) a slot.
--   running    leased by one worker (lease_owner/lease_token/lease_expires_at). Left by the lease holder's
--              fenced writes (completed, pending again, failed, cancelled), or — once lease_expires_at has
--              passed — by job_claim, which hands it to another worker as a new attempt.
--   completed  done; its successor (if any) was inserted in the same transaction. Final.
--   failed     its retry budget is spent or the handler refused it; the run was ended in the same
--              transaction. Final unless an admin requeues it (fresh attempt budget).
--   cancelled  its run was stopped or cancelled. Final unless an admin requeues it.
CREATE TABLE job (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- state next to id, for operators reading `SELECT *` during an incident.
    state            text        NOT NULL DEFAULT 'pending',
    kind             text        NOT NULL,
    run_id           uuid        NOT NULL REFERENCES transfer_run (id),
    -- The batch's place in its run: 0, 1, 2, … A retry reuses the row, so (run_id, seq) is unique.
    seq              bigint      NOT NULL,
    -- Claims so far, counting the one in flight. A snooze gives its attempt back.
    attempt          integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL,
    priority         smallint    NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL DEFAULT now(),
    -- The last worker that claimed it (kept after the lease ends, for diagnosis).
    lease_owner      text,
    -- Set only while running. Every write of the lease holder names this token, so a worker that lost
    -- its lease (expired and re-claimed, rescued, cancelled) writes nothing.
    lease_token      uuid,
    lease_expires_at timestamptz,
    attempted_at     timestamptz,
    last_error       text,
    payload          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    CONSTRAINT job_state_known CHECK (state IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    CONSTRAINT job_seq_not_negative CHECK (seq >= 0),
    CONSTRAINT job_attempt_not_negative CHECK (attempt >= 0),
    CONSTRAINT job_max_attempts_positive CHECK (max_attempts > 0),
    CONSTRAINT job_priority_in_range CHECK (priority BETWEEN -100 AND 100),
    CONSTRAINT job_kind_not_empty CHECK (kind <> ''),
    -- A lease exists exactly while the job runs, and always with its expiry.
    CONSTRAINT job_lease_iff_running CHECK ((state = 'running') = (lease_token IS NOT NULL)),
    CONSTRAINT job_lease_has_expiry CHECK ((lease_token IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT job_running_has_owner CHECK (state <> 'running' OR lease_owner IS NOT NULL),
    -- A finished job says when it finished; a live one does not.
    CONSTRAINT job_finished_iff_final CHECK ((state IN ('completed', 'failed', 'cancelled')) = (finished_at IS NOT NULL)),
    -- No sequence twice in a run: a duplicated successor is refused by the database.
    CONSTRAINT job_run_seq_unique UNIQUE (run_id, seq)
)
-- Each job row is updated 2–3 times in its short life (claim, maybe heartbeats, completion): leave room
-- on the page for the new versions.
WITH (fillfactor = 70);

-- Single-flight (SPEC §7 I4): at most one live job per run, enforced by the database rather than by the
-- claim's care. A handler completes its job before inserting the successor in the same transaction.
CREATE UNIQUE INDEX job_one_live_per_run ON job (run_id) WHERE state IN ('pending', 'running');

-- The claim's two entry points: due pending jobs, and running jobs whose lease has expired. Both are
-- partial, so they stay as small as the number of live runs however long the history grows; the
-- history (completed/failed/cancelled) is never scanned by a claim.
CREATE INDEX job_pending_due ON job (run_at) WHERE state = 'pending';
CREATE INDEX job_running_lease ON job (lease_expires_at) WHERE state = 'running';

-- Retention (admin prune) finds old finished jobs without reading live ones.
CREATE INDEX job_finished ON job (finished_at) WHERE finished_at IS NOT NULL;

-- ------------------------------------------------------------------------------------------------- run_slot

-- The global `concurrent runs` cap (SPEC §7, §8). Slots 1..64 exist; those numbered up to the setting are
-- in use. A run takes a free one in the same statement that claims its first job (job_claim) and keeps it
-- while it runs or waits, between batches too, so the cap limits runs, not batches. It is released in the
-- transaction that ends or stops the run. Lowering the setting evicts nobody: a run keeps a slot above the
-- new cap until it ends.
CREATE TABLE run_slot (
    slot     integer     PRIMARY KEY,
    run_id   uuid        UNIQUE REFERENCES transfer_run (id),
    taken_at timestamptz,
    CONSTRAINT run_slot_number_in_range CHECK (slot BETWEEN 1 AND 64),
    CONSTRAINT run_slot_taken_iff_held CHECK ((run_id IS NULL) = (taken_at IS NULL))
)
-- 64 tiny rows updated at every run start and end.
WITH (fillfactor = 50);

INSERT INTO run_slot (slot) SELECT generate_series(1, 64);

-- -------------------------------------------------------------------------------------------------- setting

-- SPEC §8 settings: runtime-changeable, one row per key, value as JSON. Seeded from config/default.toml by
-- `artemis-transfer migrate` (ON CONFLICT DO NOTHING, so a changed value survives the next migrate).
CREATE TABLE setting (
    key        text        PRIMARY KEY,
    value      jsonb       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NOT NULL,
    CONSTRAINT setting_key_known CHECK (key IN (
        'batch_size', 'messages_per_second', 'concurrent_runs', 'capacity_threshold_pct',
        'capacity_wait_secs', 'safety_cap', 'batch_bytes', 'node_calls_per_second', 'target_attempts',
        'dmq_chain', 'dmq_send_attempts', 'dmq_send_interval_secs', 'dmq_time_to_live_secs')),
    -- run_slot has 64 rows.
    CONSTRAINT setting_concurrent_runs_in_range CHECK (
        key <> 'concurrent_runs' OR (jsonb_typeof(value) = 'number' AND (value #>> '{}')::numeric BETWEEN 1 AND 64)),
    CONSTRAINT setting_node_rate_positive CHECK (
        key <> 'node_calls_per_second' OR (jsonb_typeof(value) = 'number' AND (value #>> '{}')::numeric > 0))
);

-- ------------------------------------------------------------------------------------------------ run_event

-- What happened to a run, for its view (SPEC §7): lease expiries with the worker that lost it, stops,
-- retries exhausted, ends. Not a log of every batch (that is the job table).
CREATE TABLE run_event (
    id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id uuid        NOT NULL REFERENCES transfer_run (id),
    at     timestamptz NOT NULL DEFAULT now(),
    kind   text        NOT NULL,
    detail jsonb       NOT NULL DEFAULT '{}'::jsonb
);

-- A run's events in order.
CREATE INDEX run_event_by_run ON run_event (run_id, id);

-- ---------------------------------------------------------------------------------------------------- audit

-- Every admin or operator action (SPEC §7, §9): who, what, on what, when, with what outcome. Never pruned
-- by the engine.
CREATE TABLE audit (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text        NOT NULL,
    action  text        NOT NULL,
    target  text        NOT NULL,
    outcome text        NOT NULL,
    detail  jsonb       NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT audit_actor_not_empty CHECK (actor <> ''),
    CONSTRAINT audit_outcome_known CHECK (outcome IN ('ok', 'refused', 'error'))
);

CREATE INDEX audit_by_time ON audit (at);

-- ---------------------------------------------------------------------------------------------- node_budget

-- The per-node rate limiter shared with the rest of Studio (SPEC §8 `per-node management calls/s`): one
-- token bucket per broker node, capacity = one second's worth, refilled continuously.
CREATE TABLE node_budget (
    node        text             PRIMARY KEY,
    tokens      double precision NOT NULL,
    refilled_at timestamptz      NOT NULL,
    CONSTRAINT node_budget_tokens_not_negative CHECK (tokens >= 0)
)
WITH (fillfactor = 50);

-- transfer_node_permit(node, cost): take `cost` tokens from the node's bucket if it holds them.
-- Returns 0 when granted; otherwise the seconds to wait until it would be granted (nothing is taken).
-- Callable by anything that reaches the database (the Studio backend calls it from SQL):
--   SELECT transfer_node_permit('east-1', 1);
-- Call it in a short transaction of its own: it locks the node's row until the caller commits.
CREATE FUNCTION transfer_node_permit(p_node text, p_cost double precision DEFAULT 1)
RETURNS double precision
LANGUAGE plpgsql
AS $$
DECLARE
    rate      double precision;
    at_now    timestamptz := clock_timestamp();  -- not now(): a caller's long transaction must not freeze time
    bucket    node_budget;
    available double precision;
BEGIN
    SELECT (value #>> '{}')::double precision INTO rate FROM setting WHERE key = 'node_calls_per_second';
    IF rate IS NULL THEN
        RAISE EXCEPTION 'setting node_calls_per_second is missing: run `artemis-transfer migrate`';
    END IF;
    IF p_cost IS NULL OR p_cost <= 0 OR p_cost > rate THEN
        -- A cost above the bucket's capacity could never be granted: refuse rather than wait forever.
        RAISE EXCEPTION 'permit cost % must be > 0 and <= the node rate %', p_cost, rate;
    END IF;
    INSERT INTO node_budget (node, tokens, refilled_at) VALUES (p_node, rate, at_now)
        ON CONFLICT (node) DO NOTHING;
    SELECT * INTO bucket FROM node_budget WHERE node = p_node FOR UPDATE;
    available := least(rate, bucket.tokens + rate * greatest(0, extract(epoch FROM at_now - bucket.refilled_at)));
    IF available >= p_cost THEN
        UPDATE node_budget SET tokens = available - p_cost, refilled_at = at_now WHERE node = p_node;
        RETURN 0;
    END IF;
    RETURN (p_cost - available) / rate;
END;
$$;
