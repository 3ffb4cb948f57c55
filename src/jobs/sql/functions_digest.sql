-- functions_digest: the digest of the SQL functions last applied (no row: never recorded).
SELECT digest FROM schema_functions
