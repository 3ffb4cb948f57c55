-- Which definitions of the SQL functions the database runs. `jobs::migrate` applies sql/functions/ after the
-- migrations, every time, so a build older (or newer) than the one serving could have applied its own bodies
-- without changing the schema's version: the digest recorded here, in the same transaction as the bodies, lets
-- `/ready` tell (src/jobs/functions.rs). One row, written by every apply.
CREATE TABLE schema_functions (
    -- Always true: the table holds one row.
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    -- sha256 of sql/functions/'s file names and contents, in name order, as lowercase hex.
    digest     text        NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    applied_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE schema_functions IS
    'The digest of the sql/functions/ files last applied, so /ready can tell a database whose functions another build applied';
