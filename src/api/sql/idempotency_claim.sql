-- idempotency_claim: claims key $2 of service $1 for the request of fingerprint $3; true when this request is the
-- first with the key, false when a row holds it already (read it with idempotency_get).
INSERT INTO api_idempotency (service, key, fingerprint) VALUES ($1, $2, $3)
ON CONFLICT (service, key) DO NOTHING
RETURNING true
