-- The per-node token bucket (0001) grants a request that costs more than the bucket holds.
--
-- A request is one batched management call that reads several things at once (a preview's batch costs 5 or 6
-- reads, a relay guard's 4): with `node calls per second` set below that, 0001 refused such a request outright,
-- so a preview read the node as unreachable and a run could never pass its guard. Now a request costing more
-- than the rate is granted once the bucket is full, and the bucket goes into debt by the difference: nothing
-- else is granted on that node until the debt is repaid at the node's rate, so the rate holds on average and the
-- only burst is that one request. A cost within the rate is treated as before.
-- The debt is a negative balance, so the constraint of 0001 (tokens >= 0) goes.
ALTER TABLE node_budget DROP CONSTRAINT node_budget_tokens_not_negative;

CREATE OR REPLACE FUNCTION transfer_node_permit(p_node text, p_cost double precision DEFAULT 1)
RETURNS double precision
LANGUAGE plpgsql
AS $$
DECLARE
    rate      double precision;
    at_now    timestamptz := clock_timestamp();  -- not now(): a caller's long transaction must not freeze time
    bucket    node_budget;
    available double precision;
    needed    double precision;
BEGIN
    SELECT (value #>> '{}')::double precision INTO rate FROM setting WHERE key = 'node_calls_per_second';
    IF rate IS NULL THEN
        RAISE EXCEPTION 'setting node_calls_per_second is missing: run `artemis-transfer migrate`';
    END IF;
    IF p_cost IS NULL OR p_cost <= 0 THEN
        RAISE EXCEPTION 'permit cost % must be > 0', p_cost;
    END IF;
    IF rate <= 0 THEN
        RAISE EXCEPTION 'setting node_calls_per_second is %: it must be > 0', rate;
    END IF;
    INSERT INTO node_budget (node, tokens, refilled_at) VALUES (p_node, rate, at_now)
        ON CONFLICT (node) DO NOTHING;
    SELECT * INTO bucket FROM node_budget WHERE node = p_node FOR UPDATE;
    available := least(rate, bucket.tokens + rate * greatest(0, extract(epoch FROM at_now - bucket.refilled_at)));
    -- What must be in the bucket before this request goes: its cost, or a full bucket when it costs more.
    needed := least(p_cost, rate);
    IF available >= needed THEN
        UPDATE node_budget SET tokens = available - p_cost, refilled_at = at_now WHERE node = p_node;
        RETURN 0;
    END IF;
    RETURN (needed - available) / rate;
END;
$$;
