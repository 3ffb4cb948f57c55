//! The current definition of every SQL function of the schema (`sql/functions/`), applied after the migrations
//! each time the schema is brought up ([`super::migrate`]).
//!
//! Migrations are history: sqlx refuses to start when an applied one changes, so a function redefined in three
//! migrations had its current body only in the last of them. The bodies live here instead, one file per concern,
//! each a list of `CREATE OR REPLACE FUNCTION`, so `git grep` finds the one definition the database runs.
//! `migrations/README.md` says what still needs a migration (a dropped function, a changed return type).
//!
//! Every apply records the files' [`digest`] with them (`schema_functions`): a build older or newer than the one
//! serving could apply its own bodies without changing the schema's version, and `/ready` compares the digest
//! recorded with this build's to tell.

use std::sync::LazyLock;

use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::jobs::store::schema;

/// The files of `sql/functions/`, embedded in the binary, in the order they are applied. A SQL-language function
/// is checked against the schema when it is created, so a file comes after the tables it reads (all created by
/// the migrations) — PL/pgSQL bodies are checked only when they run, so the order between files is free.
pub const FILES: &[(&str, &str)] = &[
    ("node_budget.sql", include_str!("../../sql/functions/node_budget.sql")),
    ("permissions.sql", include_str!("../../sql/functions/permissions.sql")),
    ("audit.sql", include_str!("../../sql/functions/audit.sql")),
    ("runs.sql", include_str!("../../sql/functions/runs.sql")),
    ("action_checks.sql", include_str!("../../sql/functions/action_checks.sql")),
    ("actions.sql", include_str!("../../sql/functions/actions.sql")),
    ("action_entry_points.sql", include_str!("../../sql/functions/action_entry_points.sql")),
];

/// The advisory lock that serialises [`apply`] across replicas starting at once: two concurrent `CREATE OR
/// REPLACE` of one function fail with "tuple concurrently updated". Any fixed key of ours will do ("atfunc").
const APPLY_LOCK: i64 = 0x6174_6675_6e63;

/// Why the function files could not be applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// Taking the lock, beginning or committing the transaction.
    #[error("applying the SQL functions failed")]
    Transaction(#[source] sqlx::Error),
    /// The digest of the files applied could not be recorded.
    #[error("recording the SQL functions' digest failed")]
    Digest(#[source] sqlx::Error),
    /// A file was refused (its SQL, or a table it reads is not there).
    #[error("applying sql/functions/{file} failed")]
    File {
        /// The file.
        file: &'static str,
        /// What Postgres said.
        #[source]
        source: sqlx::Error,
    },
}

/// Applies every file of [`FILES`], in order, and records their [`digest`], in one transaction under
/// [`APPLY_LOCK`]: all of it or none, and one replica at a time. Applying them again changes nothing.
pub async fn apply(pool: &PgPool) -> Result<(), ApplyError> {
    let mut tx = pool.begin().await.map_err(ApplyError::Transaction)?;
    schema::functions_lock(&mut *tx, APPLY_LOCK).await.map_err(ApplyError::Transaction)?;
    for &(file, sql) in FILES {
        sqlx::raw_sql(sql).execute(&mut *tx).await.map_err(|source| ApplyError::File { file, source })?;
    }
    schema::functions_digest_record(&mut *tx, digest()).await.map_err(ApplyError::Digest)?;
    tx.commit().await.map_err(ApplyError::Transaction)
}

/// The sha256 of [`FILES`]' names and contents, in name order, as lowercase hex: what this build's [`apply`]
/// records, and `/ready` expects to find.
pub fn digest() -> &'static str {
    static DIGEST: LazyLock<String> = LazyLock::new(|| digest_of(FILES));
    &DIGEST
}

/// The digest of `files`, independent of their order. Each name and content is preceded by its length, so no
/// two different sets of files hash the same bytes.
fn digest_of(files: &[(&str, &str)]) -> String {
    let mut sorted = files.to_vec();
    sorted.sort_unstable();
    let mut hash = Sha256::new();
    for (name, content) in sorted {
        for part in [name, content] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
        }
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_lowercase_hex_of_the_names_and_contents_in_any_order() {
        let files = [("a.sql", "SELECT 1;"), ("b.sql", "SELECT 2;")];
        let hashed = digest_of(&files);
        assert_eq!(hashed.len(), 64);
        assert!(hashed.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)), "{hashed}");
        assert_eq!(digest_of(&[files[1], files[0]]), hashed, "the order of the list does not count");
        assert_ne!(digest_of(&[("a.sql", "SELECT 1;"), ("b.sql", "SELECT 3;")]), hashed, "a content counts");
        assert_ne!(digest_of(&[("a.sql", "SELECT 1;"), ("c.sql", "SELECT 2;")]), hashed, "a name counts");
        assert_ne!(digest_of(&[("a.sql", "SELECT 1;b.sql"), ("", "SELECT 2;")]), hashed, "where one part ends counts");
        assert_eq!(digest(), digest_of(FILES));
    }
}
