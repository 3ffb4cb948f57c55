-- 0002: the cluster registry (issue 4; SPEC §3, §10), and what a preview stores on its run.
--
-- A cluster is a set of logical nodes. A logical node is keyed by the broker's NodeID, which a primary and
-- its backup share, so a live/backup pair is one node with several endpoints; the live one is found by asking
-- (Active=true), so a run continues on the backup after failover.
--
-- Credentials are never stored here: a cluster names its credentials (`credentials_ref`), and the process
-- reads them from its environment (ARTEMIS_TRANSFER_CREDENTIALS__<REF>__USER / __PASSWORD).

CREATE TABLE cluster (
    name            text        PRIMARY KEY,
    credentials_ref text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT cluster_name_plain CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$'),
    CONSTRAINT cluster_credentials_ref_plain CHECK (credentials_ref ~ '^[A-Za-z0-9_]+$')
);

CREATE TABLE cluster_node (
    cluster     text        NOT NULL REFERENCES cluster (name) ON DELETE CASCADE,
    name        text        NOT NULL,
    -- The broker's NodeID; shared by a primary and its shared-store or replicated backup.
    node_id     text        NOT NULL,
    -- The broker's <name>, which its MBean names use.
    broker_name text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, name),
    CONSTRAINT cluster_node_one_per_node_id UNIQUE (cluster, node_id),
    CONSTRAINT cluster_node_name_plain CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$')
);

-- The ways to reach a logical node: its primary and its backups, each with a Core URL and a Jolokia URL.
CREATE TABLE cluster_endpoint (
    cluster     text NOT NULL,
    node        text NOT NULL,
    core_url    text NOT NULL,
    jolokia_url text NOT NULL,
    -- What the endpoint was when it was registered; which one is live now is asked, never assumed.
    role        text NOT NULL,
    -- The broker <name> behind this endpoint (a backup may be named differently from its primary).
    broker_name text NOT NULL,
    PRIMARY KEY (cluster, node, core_url),
    FOREIGN KEY (cluster, node) REFERENCES cluster_node (cluster, name) ON DELETE CASCADE,
    CONSTRAINT cluster_endpoint_role_known CHECK (role IN ('primary', 'backup'))
);

-- What a preview stores on its run (state 'previewed'): the plan it showed, bound by its hash, and until when
-- it may be executed.
ALTER TABLE transfer_run
    ADD COLUMN mode             text,
    ADD COLUMN source_cluster   text,
    ADD COLUMN source_node      text,
    ADD COLUMN source_queue     text,
    ADD COLUMN target_cluster   text,
    ADD COLUMN target_node      text,
    ADD COLUMN target_queue     text,
    ADD COLUMN plan             jsonb,
    ADD COLUMN plan_hash        text,
    ADD COLUMN preview          jsonb,
    ADD COLUMN preview_expires_at timestamptz,
    ADD CONSTRAINT transfer_run_mode_known CHECK (mode IS NULL OR mode IN ('move', 'copy'));

-- "At most one active run per source queue on a node", and "the target is the source of another active run",
-- are asked by queue; this index answers both.
CREATE INDEX transfer_run_active_source ON transfer_run (source_cluster, source_node, source_queue)
    WHERE state IN ('queued', 'running', 'waiting', 'returning');
