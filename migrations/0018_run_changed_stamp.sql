-- A run's row says when it last changed, so a client polling the list of runs (`GET /api/v1/runs?changed_after=`,
-- issue 30: "a cheap poll for the runs list") is given only the runs that changed (ADR 0025).
--
-- `updated_at` was written by each writer as `now()`, the start of its transaction, and not by all of them (the
-- execute function's own UPDATE left it). A trigger now stamps every INSERT and UPDATE, whoever writes, with the
-- instant of the write (clock_timestamp(), after the row's lock is taken), overriding what the writer set.
--
-- A write becomes visible when its transaction commits, which may be after a reader's answer was read. So before it
-- stamps, the trigger takes a shared advisory lock, held until its transaction ends, whose second key is the
-- whole second of the write (seconds since 2020-01-01 UTC) under the first key 1634890866 ('artr'). A reader
-- looks at those locks (pg_locks, which every role may read) before it reads the runs: the oldest one bounds what
-- may still commit late, and the answer's `as_of` is taken no later than it (run_changes_as_of.sql). Shared
-- locks never wait on each other; nothing takes this key exclusively.
--
-- No index: `transfer_run` is a small table (pruned by retention) that the list already reads whole, and an index
-- on a column every batch rewrites would end its HOT updates (fillfactor 80, migration 0001).

-- The trigger's first body: the stamp alone. Its current one, with the lock, is in sql/functions/runs.sql, which
-- `migrate` applies right after the migrations; a build serves only once it is in force (`/ready`).
CREATE OR REPLACE FUNCTION transfer_run_changed() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    NEW.updated_at := clock_timestamp();
    RETURN NEW;
END;
$$;

CREATE TRIGGER transfer_run_changed BEFORE INSERT OR UPDATE ON transfer_run FOR EACH ROW
    EXECUTE FUNCTION transfer_run_changed();
