//! A fresh database per test on the test bed's Postgres, so tests run in parallel without seeing each
//! other's rows. Databases are named `t_<label>_<random>`; `scripts/testbed down` takes them with the cluster.

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};

use crate::config::TestBed;

/// Creates an empty database and returns its URL. The label (the test's name) makes leftovers traceable.
pub async fn fresh_database(label: &str) -> String {
    let bed = TestBed::require().await;
    let label: String =
        label.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).take(30).collect();
    let name = format!("t_{label}_{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let admin: PgConnectOptions = bed.database_url.parse().expect("the test bed's database URL parses");
    let mut conn = admin.connect().await.unwrap_or_else(|e| panic!("cannot connect to the test bed's Postgres: {e}"));
    sqlx::query(&format!("CREATE DATABASE \"{name}\"")).execute(&mut conn).await.expect("create a test database");
    conn.close().await.ok();
    let (base, _) = bed.database_url.rsplit_once('/').expect("a database URL ends with /<database>");
    format!("{base}/{name}")
}
