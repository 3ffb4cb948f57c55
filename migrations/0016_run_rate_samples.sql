-- A run's rate over time (issue 30: "per-node outcome and rate history as data"): one sample of its delivered
-- count each time a batch changes it, written by a trigger on transfer_run so that every writer of the counters
-- (the relay, a return, a stop) is sampled without knowing. The console's rate chart and the API's
-- `GET /runs/{run}/progress` read them; they go with their run (ON DELETE CASCADE, run_prune).
CREATE TABLE run_rate_sample (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id    uuid        NOT NULL REFERENCES transfer_run (id) ON DELETE CASCADE,
    at        timestamptz NOT NULL DEFAULT now(),
    delivered bigint      NOT NULL,
    CONSTRAINT run_rate_sample_delivered_not_negative CHECK (delivered >= 0)
);

CREATE INDEX run_rate_sample_by_run ON run_rate_sample (run_id, at);

-- The trigger's first body (its current one is in sql/functions/runs.sql).
CREATE OR REPLACE FUNCTION run_rate_sample() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO run_rate_sample (run_id, delivered)
    VALUES (NEW.id, greatest(coalesce((NEW.counters ->> 'delivered')::bigint, 0), 0));
    RETURN NULL;
END;
$$;

CREATE TRIGGER run_rate_sample AFTER UPDATE OF counters ON transfer_run FOR EACH ROW
    WHEN ((OLD.counters -> 'delivered') IS DISTINCT FROM (NEW.counters -> 'delivered'))
    EXECUTE FUNCTION run_rate_sample();
