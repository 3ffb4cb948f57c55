//! Where the app's SQL lives (`migrations/README.md`, "Where queries live"): every statement is a `.sql` file in
//! the `sql/` folder beside its concern's store module, read by exactly one store function, and only a store
//! module runs a statement. These tests read the source tree, so a query written inline anywhere else fails here
//! instead of in review.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The crate's `src/`.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every file under `dir` whose name ends with `ending`, sorted.
fn files(dir: &Path, ending: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a readable source folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            out.extend(files(&path, ending));
        } else if path.to_string_lossy().ends_with(ending) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// A store module: a file named `store.rs`, or any file in a folder named `store`.
fn is_store(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "store.rs")
        || path.parent().and_then(Path::file_name).is_some_and(|n| n == "store")
}

/// The ways to run a statement with sqlx. Spelled in two halves so this file does not match itself.
const RUNNERS: [&str; 3] = [concat!("sqlx::", "query"), concat!("sqlx::", "raw_sql"), concat!("Query", "Builder")];

/// `src/jobs/functions.rs` runs the files of `sql/functions/` (whole files, each a list of definitions) with
/// `raw_sql`; that is its one job, and its own statement (the lock) is in the jobs store.
fn allowed_outside_a_store(path: &Path, runner: &str) -> bool {
    runner == RUNNERS[1] && path.ends_with("jobs/functions.rs")
}

#[test]
fn only_store_modules_run_statements() {
    let mut offenders = Vec::new();
    for path in files(&src(), ".rs") {
        if is_store(&path) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a readable source file");
        for (n, line) in text.lines().enumerate() {
            let imports_a_runner = line.trim_start().starts_with("use sqlx::") && line.contains("query");
            let runner = RUNNERS.iter().find(|r| line.contains(*r) && !allowed_outside_a_store(&path, r));
            if runner.is_some() || imports_a_runner {
                offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "a statement outside a store module; move it into its store:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn a_store_reads_every_statement_from_a_sql_file() {
    let mut inline = Vec::new();
    for path in files(&src(), ".rs").into_iter().filter(|p| is_store(p)) {
        let text = std::fs::read_to_string(&path).expect("a readable source file");
        for (at, _) in text.match_indices(RUNNERS[0]) {
            // The call's first argument, past any turbofish, is the statement: it must be a file's text.
            let call = &text[at..];
            let argument = call.find('(').map(|open| call[open + 1..].trim_start());
            if !argument.is_some_and(|a| a.starts_with("include_str!(\"")) {
                let line = text[..at].lines().count();
                inline.push(format!("{}:{line}", path.display()));
            }
        }
    }
    assert!(inline.is_empty(), "a statement written inline in a store; put it in a .sql file:\n{}", inline.join("\n"));
}

#[test]
fn each_sql_file_is_read_by_exactly_one_store_function() {
    let sql_files: Vec<PathBuf> = files(&src(), ".sql")
        .into_iter()
        .filter(|p| p.parent().and_then(Path::file_name).is_some_and(|n| n == "sql"))
        .collect();
    assert!(!sql_files.is_empty(), "no statement files found under {}", src().display());
    let mut readers: BTreeMap<PathBuf, Vec<String>> =
        sql_files.iter().map(|f| (f.canonicalize().expect("a statement file's path"), Vec::new())).collect();
    for path in files(&src(), ".rs") {
        let text = std::fs::read_to_string(&path).expect("a readable source file");
        for (at, _) in text.match_indices("include_str!(\"") {
            let rest = &text[at + "include_str!(\"".len()..];
            let Some(end) = rest.find('"') else { continue };
            let Ok(target) = path.parent().expect("a file's folder").join(&rest[..end]).canonicalize() else {
                continue;
            };
            if let Some(found) = readers.get_mut(&target) {
                found.push(path.display().to_string());
            }
        }
    }
    let wrong: Vec<String> = readers
        .iter()
        .filter(|(_, by)| by.len() != 1 || !by.iter().all(|p| is_store(Path::new(p))))
        .map(|(file, by)| format!("{} is read by {by:?}", file.display()))
        .collect();
    assert!(wrong.is_empty(), "a statement file must be read by one store function:\n{}", wrong.join("\n"));
}
