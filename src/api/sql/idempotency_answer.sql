-- idempotency_answer: the answer (status $3, content type $4, Location $5, body $6) of the first request with key
-- $2 of service $1.
UPDATE api_idempotency SET status = $3, content_type = $4, location = $5, body = $6 WHERE service = $1 AND key = $2
