-- idempotency_get: what key $2 of service $1 holds: the first request's fingerprint and, once answered, its answer.
SELECT fingerprint, status, content_type, location, body FROM api_idempotency WHERE service = $1 AND key = $2
