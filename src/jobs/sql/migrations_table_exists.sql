-- migrations_table_exists: whether sqlx's _sqlx_migrations table exists (false on a database never migrated).
SELECT to_regclass('_sqlx_migrations') IS NOT NULL
