//! Rebuilds the crate when a migration is added: `sqlx::migrate!("./migrations")` (src/jobs/mod.rs) embeds each
//! file with `include_str!`, which tracks edits but not new files (sqlx's documented build-script workaround).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
