-- idempotency_release: frees key $2 of service $1 (its first request failed on a system, not on its content, so a
-- retry may try again).
DELETE FROM api_idempotency WHERE service = $1 AND key = $2 AND status IS NULL
