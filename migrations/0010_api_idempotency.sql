-- Idempotency-Key (issue 16): the first answer to a POST of the HTTP API per calling service and key, replayed to
-- every retry of the same request (src/api/idempotency.rs). Rows older than a day are removed by the next request
-- that claims a key.
CREATE TABLE api_idempotency (
    service      text        NOT NULL,
    key          text        NOT NULL,
    -- sha256 of the method, the path, the operator and the body: a key sent again with another request is refused.
    fingerprint  bytea       NOT NULL,
    -- null while the first request is being answered.
    status       smallint,
    content_type text,
    location     text,
    body         bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (service, key)
);

CREATE INDEX api_idempotency_by_age ON api_idempotency (created_at);
