-- schema_version: the newest migration applied successfully (null on a database never migrated).
SELECT max(version) FROM _sqlx_migrations WHERE success
