-- functions_digest_record: the SQL functions of digest $1 (lowercase hex sha256) were just applied, in this
-- transaction.
INSERT INTO schema_functions (digest) VALUES ($1)
ON CONFLICT (singleton) DO UPDATE SET digest = excluded.digest, applied_at = now()
