//! `sql/functions/` holds the one current definition of every SQL function, and the database runs it: what
//! `jobs::migrate` leaves is exactly the files, however the migrations defined the functions before — and the
//! digest of the files applied, which `/ready` compares with the build's.

use artemis_transfer::jobs::functions::{self, FILES};
use artemis_transfer::jobs::store::schema;
use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::support;

/// The functions of the `public` schema that no extension owns, as (name, body), sorted.
async fn database_functions(pool: &PgPool) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT p.proname::text, p.prosrc FROM pg_proc p \
         JOIN pg_namespace n ON n.oid = p.pronamespace \
         LEFT JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e' \
         WHERE n.nspname = 'public' AND d.objid IS NULL \
         ORDER BY 1, 2",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Every function's full definition as Postgres prints it, in a stable order.
async fn definitions(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
         WHERE n.nspname = 'public' ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The functions the files define, as (name, body between the `$$`), sorted. Each definition must be spelled
/// `CREATE OR REPLACE FUNCTION name(` with its body quoted `$$…$$` (the files' convention).
fn file_functions() -> Vec<(String, String)> {
    const CREATE: &str = "CREATE OR REPLACE FUNCTION ";
    let mut found = Vec::new();
    for (file, sql) in FILES {
        assert!(!sql.contains("CREATE FUNCTION"), "{file}: a definition without OR REPLACE cannot be applied twice");
        for (at, _) in sql.match_indices(CREATE) {
            let rest = &sql[at + CREATE.len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let body = rest.split("$$").nth(1).unwrap_or_else(|| panic!("{file}: {name} has no $$-quoted body"));
            found.push((name, body.to_string()));
        }
    }
    found.sort();
    found
}

fn names(functions: &[(String, String)]) -> Vec<&str> {
    functions.iter().map(|(name, _)| name.as_str()).collect()
}

/// (a) The migrated database has exactly the files' functions — by name, as many of each (a signature changed
/// in a file leaves the old overload behind, which a migration must drop) — and (c) runs the files' bodies.
#[tokio::test]
async fn the_database_runs_exactly_the_function_files() {
    let db = support::db("functions_files").await;
    let in_files = file_functions();
    let in_database = database_functions(&db.pool).await;
    assert_eq!(names(&in_database), names(&in_files), "the functions in the database and in sql/functions/");
    for ((name, runs), (_, written)) in in_database.iter().zip(&in_files) {
        assert_eq!(runs, written, "{name}: the database runs another body than sql/functions/ holds");
    }
}

/// (b) Applying the files again changes nothing, and replicas applying them at once do not collide.
#[tokio::test]
async fn applying_the_function_files_again_or_at_once_changes_nothing() {
    let db = support::db("functions_again").await;
    let before = definitions(&db.pool).await;
    functions::apply(&db.pool).await.expect("applied a second time");
    assert_eq!(definitions(&db.pool).await, before);
    let replicas = (0..4).map(|_| functions::apply(&db.pool));
    for applied in futures_util::future::join_all(replicas).await {
        applied.expect("replicas starting at once each apply the files");
    }
    assert_eq!(definitions(&db.pool).await, before);
}

/// The digest recorded and when, as the table holds it.
async fn recorded(pool: &PgPool) -> Vec<(String, DateTime<Utc>)> {
    sqlx::query_as("SELECT digest, applied_at FROM schema_functions").fetch_all(pool).await.unwrap()
}

/// (d) Applying records this build's digest of the files in the same transaction, in one row; applying again,
/// or over another build's digest, leaves that one row with this build's digest.
#[tokio::test]
async fn applying_the_function_files_records_their_digest_in_one_row() {
    let db = support::db("functions_digest").await;
    let first = recorded(&db.pool).await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].0, functions::digest());
    assert_eq!(schema::functions_digest(&db.pool).await.unwrap().as_deref(), Some(functions::digest()));

    functions::apply(&db.pool).await.expect("applied a second time");
    let again = recorded(&db.pool).await;
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].0, functions::digest());
    assert!(again[0].1 >= first[0].1, "the row says when the functions were applied last");

    let another = "0".repeat(64);
    sqlx::query("UPDATE schema_functions SET digest = $1").bind(&another).execute(&db.pool).await.unwrap();
    assert_eq!(schema::functions_digest(&db.pool).await.unwrap(), Some(another));
    functions::apply(&db.pool).await.expect("applied over another build's");
    assert_eq!(schema::functions_digest(&db.pool).await.unwrap().as_deref(), Some(functions::digest()));
    assert_eq!(recorded(&db.pool).await.len(), 1);
}
