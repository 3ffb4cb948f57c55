-- The per-node rate limiter shared with the rest of Studio (docs/settings.md, `node_calls_per_second`): one token
-- bucket per broker node (table node_budget), capacity = one second's worth, refilled continuously, going into
-- debt for a request that costs more than a full bucket.
--   transfer_node_permit(node, cost)   0 when granted (tokens taken), else the seconds to wait before asking again
--                                      (nothing taken). Callable from SQL by the Studio backend:
--                                        SELECT transfer_node_permit('east-1', 1);
--   transfer_node_reserve(node, cost)  takes the tokens at once, in the order the callers come, and answers how long
--                                      to wait before the call (first come, first served: a big request is not
--                                      starved by cheaper ones)
--   transfer_node_reserve_ahead(node, cost, ahead)
--                                      transfer_node_reserve, and with it up to `ahead` seconds' worth of spare
--                                      tokens the bucket holds beyond the cost now (never into debt): a worker
--                                      spends them on its next calls to the node within `ahead`, or they lapse
-- Call them in a short transaction of their own: they lock the node's row until the caller commits.

-- The bucket of p_node as of p_at, locked for the caller's transaction: its rate and what it holds (negative while
-- in debt). Creates the row, full, on first use. Checks the setting and the cost.
CREATE OR REPLACE FUNCTION transfer_node_bucket(
    p_node text, p_cost double precision, p_at timestamptz,
    OUT rate double precision, OUT available double precision)
LANGUAGE plpgsql
AS $$
DECLARE
    bucket node_budget;
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
    INSERT INTO node_budget (node, tokens, refilled_at) VALUES (p_node, rate, p_at) ON CONFLICT (node) DO NOTHING;
    SELECT * INTO bucket FROM node_budget WHERE node = p_node FOR UPDATE;
    available := least(rate, bucket.tokens + rate * greatest(0, extract(epoch FROM p_at - bucket.refilled_at)));
END;
$$;

-- transfer_node_permit over the shared bucket: 0 when granted (tokens taken), else the seconds to wait before asking
-- again (nothing taken).
CREATE OR REPLACE FUNCTION transfer_node_permit(p_node text, p_cost double precision DEFAULT 1)
RETURNS double precision
LANGUAGE plpgsql
AS $$
DECLARE
    at_now timestamptz := clock_timestamp();  -- not now(): a caller's long transaction must not freeze time
    b      record;
    needed double precision;
BEGIN
    SELECT * INTO b FROM transfer_node_bucket(p_node, p_cost, at_now);
    -- What must be in the bucket before this request goes: its cost, or a full bucket when it costs more.
    needed := least(p_cost, b.rate);
    IF b.available >= needed THEN
        UPDATE node_budget SET tokens = b.available - p_cost, refilled_at = at_now WHERE node = p_node;
        RETURN 0;
    END IF;
    RETURN (needed - b.available) / b.rate;
END;
$$;

-- Takes p_cost tokens now and answers the seconds to wait before the call: 0 when the bucket held enough (its
-- cost, or a full bucket for a bigger cost), else the time until it would have, counting the debt of every
-- reservation before this one.
CREATE OR REPLACE FUNCTION transfer_node_reserve(p_node text, p_cost double precision DEFAULT 1)
RETURNS double precision
LANGUAGE plpgsql
AS $$
BEGIN
    -- One rule for taking tokens: transfer_node_reserve_ahead's, with no spare tokens.
    RETURN (SELECT r.wait FROM transfer_node_reserve_ahead(p_node, p_cost, 0) AS r);
END;
$$;

-- transfer_node_reserve, and the spare tokens the bucket holds now beyond p_cost, up to p_ahead seconds' worth: the
-- seconds to wait before the call, and how many spare tokens were taken with it. Spare tokens are taken only from
-- what is there (never into debt), so they never make this caller or a later one wait longer than the cost alone
-- would; a bucket in debt, or one a caller is waiting on, gives none.
CREATE OR REPLACE FUNCTION transfer_node_reserve_ahead(
    p_node text, p_cost double precision, p_ahead double precision,
    OUT wait double precision, OUT spare integer)
LANGUAGE plpgsql
AS $$
DECLARE
    at_now timestamptz := clock_timestamp();
    b      record;
BEGIN
    IF p_ahead IS NULL OR p_ahead < 0 THEN
        RAISE EXCEPTION 'spare tokens ahead % must be >= 0 seconds', p_ahead;
    END IF;
    SELECT * INTO b FROM transfer_node_bucket(p_node, p_cost, at_now);
    spare := greatest(0, least(floor(b.available - p_cost), floor(b.rate * p_ahead)))::integer;
    UPDATE node_budget SET tokens = b.available - p_cost - spare, refilled_at = at_now WHERE node = p_node;
    wait := greatest(0, least(p_cost, b.rate) - b.available) / b.rate;
END;
$$;
