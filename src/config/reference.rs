//! The configuration reference, `docs/configuration.md`, generated from the code so it cannot drift: every key of
//! [`Config`] (its sections and fields, as serde reads them, with the fields' doc comments) with its default from
//! `config/default.toml` and its environment variable; every environment variable a command-line flag reads (from
//! clap's `env` attributes); and the variables the process reads itself ([`PROCESS_VARIABLES`]). A test compares
//! the file with [`render`] and says how to regenerate it; another fails when the source reads a variable the
//! reference does not name.

use std::fmt::Write as _;

use serde_json::Value;
use utoipa::openapi::schema::{Object, Schema};
use utoipa::openapi::RefOr;
use utoipa::PartialSchema;

use super::{Config, DEFAULTS, ENV_PREFIX};

/// Where the reference lives, from the repository's root.
pub const PATH: &str = "docs/configuration.md";

/// The command that writes [`render`] to [`PATH`].
pub const REGENERATE: &str = "ARTEMIS_TRANSFER_BLESS=1 cargo test --features fault-injection --lib config::reference";

/// An environment variable the process reads itself (not a configuration key, not a flag).
#[derive(Debug, Clone, Copy)]
pub struct ProcessVariable {
    /// Its name (`<REF>` stands for a part the operator chooses).
    pub name: &'static str,
    /// Which commands read it.
    pub read_by: &'static str,
    /// What it holds.
    pub meaning: &'static str,
}

/// The variables the process reads itself.
pub const PROCESS_VARIABLES: &[ProcessVariable] = &[
    ProcessVariable {
        name: "DATABASE_URL",
        read_by: "every command",
        meaning: "The Postgres database of the job queue, runs, grants and audit: \
                  `postgres://user:password@host:5432/database`. Never from a file; its password is never logged.",
    },
    ProcessVariable {
        name: "ARTEMIS_TRANSFER_CREDENTIALS__<REF>__USER",
        read_by: "every command that reaches a broker (worker, serve, cluster add, preview, orphans)",
        meaning: "The broker user of the credentials a cluster names by reference (`cluster add --credentials <ref>`; \
                  `<REF>` upper case). Set it in the environment of every process.",
    },
    ProcessVariable {
        name: "ARTEMIS_TRANSFER_CREDENTIALS__<REF>__PASSWORD",
        read_by: "as above",
        meaning: "That user's password. Never stored, logged or answered.",
    },
    ProcessVariable {
        name: "ARTEMIS_TRANSFER_CREDENTIALS__<REF>__KEY_PASSPHRASE",
        read_by: "as above, for a cluster whose Core URL names an encrypted client key (keyStorePath)",
        meaning: "The passphrase of that key (encrypted PKCS#8 PEM, PBES2), for Core and Jolokia alike; never in \
                  the URL (keyStorePassword is refused). Unset: an encrypted key is refused in words naming this \
                  variable. Never stored, logged or answered.",
    },
    ProcessVariable {
        name: "ARTEMIS_TRANSFER_API_TOKENS",
        read_by: "serve",
        meaning: "The API's bearer tokens: comma-separated `service=token` entries (24 to 512 characters), each \
                  optionally followed by `operators=alice|bob`. Not with ARTEMIS_TRANSFER_API_TOKENS_FILE.",
    },
    ProcessVariable {
        name: "ARTEMIS_TRANSFER_API_TOKENS_FILE",
        read_by: "serve",
        meaning: "A file of token entries, one a line, `#` comments (a mounted secret); read again when it changes \
                  (`api.tokens_poll_ms`) and on SIGHUP.",
    },
    ProcessVariable {
        name: "ARTEMIS_TRANSFER_METRICS_TOKEN",
        read_by: "serve",
        meaning: "When set, a scrape of /metrics must present it as a bearer token (its own, not a service's).",
    },
    ProcessVariable {
        name: "RUST_LOG",
        read_by: "every command",
        meaning: "The log level and filters (tracing-subscriber's EnvFilter syntax), default `info`. Logs go to \
                  stderr, as text or, with `--log-format json`, one JSON object a line.",
    },
    ProcessVariable {
        name: "ARTEMIS_TRANSFER_OPERATOR",
        read_by: "the commands that act for an operator (all but migrate, worker and serve)",
        meaning: "Who acts when `--as` does not say: the operator whose grants are checked, whose name the audit \
                  records, and who sees only the runs and clusters they may (docs/cli.md, \"Who acts\").",
    },
    ProcessVariable {
        name: "ARTEMIS_TRANSFER_ACTOR",
        read_by: "as above",
        meaning: "Deprecated (the old variable of `admin` and `settings`, read for one release with a line saying \
                  so): read after ARTEMIS_TRANSFER_OPERATOR.",
    },
    ProcessVariable {
        name: "USER",
        read_by: "as above",
        meaning: "The operator when neither `--as` nor ARTEMIS_TRANSFER_OPERATOR names one. Never `$USER@host`.",
    },
    ProcessVariable {
        name: "NO_COLOR",
        read_by: "every command",
        meaning: "Set to anything, no colour and no cursor moves, even on a terminal (no-color.org). Output that is \
                  not a terminal never has them.",
    },
    ProcessVariable {
        name: "TMPDIR",
        read_by: "worker",
        meaning: "Where a worker makes its spool directory for large message bodies by default (docs/deployment.md, \
                  \"The spool directory\").",
    },
    ProcessVariable {
        name: "ARTEMIS_TRANSFER_FAULT, ARTEMIS_TRANSFER_FAULT_REFUSE, ARTEMIS_TRANSFER_FAULT_PAUSE",
        read_by: "worker, only in a build with the `fault-injection` feature (the tests)",
        meaning: "The crash tests' seams: abort at a named relay step, fake a target's refusal, pause. A release \
                  build has no such seam and ignores them.",
    },
    ProcessVariable {
        name: "ARTEMIS_TRANSFER_BLESS",
        read_by: "the test that checks this file",
        meaning: "Set to 1, the test writes this file instead of comparing it.",
    },
];

/// One section of [`Config`] as its schema describes it.
struct Section {
    name: String,
    /// The section type's doc comment, first paragraph.
    about: String,
    /// `(key, schema)` in declaration order.
    keys: Vec<(String, Value)>,
}

/// The sections of [`Config`], from the types' schemas (serde's view: skipped fields are absent), in declaration
/// order.
fn sections() -> Vec<Section> {
    let components = config_components();
    let schema = Config::schema();
    let Some(config) = object(&schema, &components) else { panic!("Config's schema is an object") };
    config
        .properties
        .iter()
        .map(|(name, property)| {
            let section = object(property, &components).unwrap_or_else(|| panic!("[{name}] is not an object"));
            Section {
                name: name.clone(),
                about: first_paragraph(section.description.as_deref().unwrap_or_default()),
                keys: section
                    .properties
                    .iter()
                    .map(|(key, schema)| (key.clone(), serde_json::to_value(schema).expect("a schema serialises")))
                    .collect(),
            }
        })
        .collect()
}

/// The schemas `Config`'s schema refers to, by name.
fn config_components() -> Vec<(String, RefOr<Schema>)> {
    use utoipa::ToSchema;
    let mut schemas = Vec::new();
    Config::schemas(&mut schemas);
    schemas
}

/// The object a schema is: its `$ref` followed into `components`, an inlined one out of its `oneOf`.
fn object<'a>(schema: &'a RefOr<Schema>, components: &'a [(String, RefOr<Schema>)]) -> Option<&'a Object> {
    match schema {
        RefOr::Ref(r) => {
            let name = r.ref_location.rsplit('/').next()?;
            components.iter().find(|(n, _)| n == name).and_then(|(_, s)| object(s, components))
        }
        RefOr::T(Schema::Object(o)) => Some(o),
        RefOr::T(Schema::OneOf(one)) => one.items.first().and_then(|item| object(item, components)),
        RefOr::T(Schema::AllOf(all)) => all.items.first().and_then(|item| object(item, components)),
        RefOr::T(_) => None,
    }
}

fn first_paragraph(text: &str) -> String {
    text.split("\n\n").next().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A key's type in words, from its schema.
fn kind(schema: &Value) -> String {
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let optional = types.contains(&"null");
    let word = match types.iter().find(|t| **t != "null").copied() {
        Some("integer") => "integer",
        Some("number") => "number",
        Some("boolean") => "true or false",
        Some("string") => "string",
        Some("array") => "list of strings",
        _ => "value",
    };
    if optional {
        format!("{word}, optional")
    } else {
        word.to_owned()
    }
}

/// The default of `section.key` in `config/default.toml`, as TOML; `None`: unset.
fn default_of(defaults: &toml::Table, section: &str, key: &str) -> Option<String> {
    defaults.get(section).and_then(|s| s.get(key)).map(|v| v.to_string())
}

/// The environment variable that sets `section.key`.
pub fn variable_of(section: &str, key: &str) -> String {
    format!("{ENV_PREFIX}{}__{}", section.to_uppercase(), key.to_uppercase())
}

/// Every flag that reads an environment variable: `(variable, flags, commands, help)`, one row per variable.
fn flag_variables() -> Vec<(String, String, Vec<String>, String)> {
    use clap::CommandFactory;
    let mut rows: Vec<(String, String, Vec<String>, String)> = Vec::new();
    fn walk(command: &clap::Command, path: &str, rows: &mut Vec<(String, String, Vec<String>, String)>) {
        for arg in command.get_arguments() {
            let Some(env) = arg.get_env() else { continue };
            let env = env.to_string_lossy().into_owned();
            let flag = format!("--{}", arg.get_long().unwrap_or(arg.get_id().as_str()));
            let help = arg.get_help().map(|h| first_paragraph(&h.to_string())).unwrap_or_default();
            match rows.iter_mut().find(|row| row.0 == env) {
                Some(row) => {
                    if !row.1.split(", ").any(|f| f == flag) {
                        row.1 = format!("{}, {flag}", row.1);
                    }
                    if !row.2.contains(&path.to_owned()) {
                        row.2.push(path.to_owned());
                    }
                    // One meaning for the variable: the plainest of its flags' helps.
                    if help.len() < row.3.len() {
                        row.3 = help;
                    }
                }
                None => rows.push((env, flag, vec![path.to_owned()], help)),
            }
        }
        for sub in command.get_subcommands() {
            let sub_path =
                if path.is_empty() { sub.get_name().to_owned() } else { format!("{path} {}", sub.get_name()) };
            walk(sub, &sub_path, rows);
        }
    }
    walk(&crate::cli::Cli::command(), "", &mut rows);
    rows
}

/// A table cell: one line, `|` escaped.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The reference, as `docs/configuration.md` holds it.
pub fn render() -> String {
    let defaults: toml::Table = DEFAULTS.parse().expect("config/default.toml parses");
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "# Configuration reference\n");
    let _ = writeln!(
        w,
        "<!-- Generated from the code (src/config/reference.rs): do not edit. To regenerate: `{REGENERATE}`. -->\n"
    );
    let _ = writeln!(
        w,
        "Every process reads its configuration at start, in this order, each layer over the one before:\n\n\
         1. the built-in defaults, `config/default.toml` (compiled into the binary);\n\
         2. a TOML file of the same shape, named by `--config <path>` or `ARTEMIS_TRANSFER_CONFIG`;\n\
         3. environment variables `{ENV_PREFIX}<SECTION>__<KEY>` (upper case, double underscores), each read as a \
         TOML value when it is one (`10`, `2.5`, `true`, `[\"a\", \"b\"]`) and as a string otherwise.\n\n\
         An unknown key, a value of the wrong type or out of range stops the process at start with words naming \
         it. The `[settings]` section holds only the defaults of the runtime settings: the database's values count \
         (see [settings](settings.md)). Secrets — the database URL, broker credentials, API tokens — are never \
         configuration keys: they come from the environment variables below.\n"
    );
    let _ = writeln!(w, "## Keys\n");
    for section in sections() {
        let _ = writeln!(w, "### `[{}]`\n", section.name);
        if !section.about.is_empty() {
            let about = section.about.trim_start_matches(&format!("`[{}]`:", section.name)).trim();
            let _ = writeln!(w, "{}\n", capitalised(about));
        }
        let _ = writeln!(w, "| Key | Default | Type | Environment variable | Meaning |");
        let _ = writeln!(w, "|---|---|---|---|---|");
        for (key, schema) in &section.keys {
            let default = default_of(&defaults, &section.name, key).map_or("unset".into(), |d| format!("`{d}`"));
            let _ = writeln!(
                w,
                "| `{key}` | {} | {} | `{}` | {} |",
                cell(&default),
                kind(schema),
                variable_of(&section.name, key),
                cell(&first_paragraph(schema["description"].as_str().unwrap_or_default()))
            );
        }
        let _ = writeln!(w);
    }
    let _ = writeln!(w, "## Environment variables of the command line's flags\n");
    let _ = writeln!(w, "A flag given on the command line wins over its variable.\n");
    let _ = writeln!(w, "| Variable | Flag | Commands | Meaning |");
    let _ = writeln!(w, "|---|---|---|---|");
    for (env, flag, commands, help) in flag_variables() {
        let commands = commands.iter().map(|c| if c.is_empty() { "every command".into() } else { format!("`{c}`") });
        let _ = writeln!(w, "| `{env}` | `{flag}` | {} | {} |", commands.collect::<Vec<_>>().join(", "), cell(&help));
    }
    let _ = writeln!(w, "\n## Environment variables the process reads\n");
    let _ = writeln!(w, "| Variable | Read by | Meaning |");
    let _ = writeln!(w, "|---|---|---|");
    for v in PROCESS_VARIABLES {
        let names: Vec<String> = v.name.split(", ").map(|n| format!("`{n}`")).collect();
        let _ = writeln!(w, "| {} | {} | {} |", names.join(", "), cell(v.read_by), cell(v.meaning));
    }
    out
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn repository() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    /// The lines where `written` and `wanted` differ, numbered, at most 40.
    fn difference(written: &str, wanted: &str) -> String {
        let (a, b): (Vec<&str>, Vec<&str>) = (written.lines().collect(), wanted.lines().collect());
        let mut shown = String::new();
        for i in (0..a.len().max(b.len())).filter(|&i| a.get(i) != b.get(i)).take(40) {
            let _ =
                writeln!(shown, "line {}:\n  - {}\n  + {}", i + 1, a.get(i).unwrap_or(&""), b.get(i).unwrap_or(&""));
        }
        shown
    }

    #[test]
    fn the_reference_is_generated_from_the_code() {
        let wanted = render();
        let path = repository().join(PATH);
        if std::env::var_os("ARTEMIS_TRANSFER_BLESS").is_some() {
            std::fs::write(&path, &wanted).unwrap();
        }
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            written == wanted,
            "{PATH} is not what the code says (- the file, + the code):\n{}\nTo regenerate it: {REGENERATE}",
            difference(&written, &wanted)
        );
    }

    #[test]
    fn every_key_of_the_defaults_is_a_key_of_the_types_and_has_words() {
        let defaults: toml::Table = DEFAULTS.parse().unwrap();
        let sections = sections();
        for (name, table) in &defaults {
            let section = sections.iter().find(|s| &s.name == name).unwrap_or_else(|| panic!("[{name}] is no section"));
            for key in table.as_table().expect("a section").keys() {
                assert!(section.keys.iter().any(|(k, _)| k == key), "{name}.{key} is no key of the types");
            }
        }
        for section in &sections {
            assert!(!section.about.is_empty(), "[{}] has no doc comment", section.name);
            for (key, schema) in &section.keys {
                assert!(
                    schema["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{}.{key}: no doc",
                    section.name
                );
            }
        }
        let keys: usize = sections.iter().map(|s| s.keys.len()).sum();
        assert!(keys > 30, "{keys} keys");
    }

    /// Every environment variable a source file names — `env::var("…")`, `var_os("…")`, `env = "…"` or any
    /// `ARTEMIS_TRANSFER_…` literal — is in the reference (a name built at run time by its prefix).
    #[test]
    fn every_variable_the_source_reads_is_in_the_reference() {
        let reference = render();
        let read = regex::Regex::new(r#"(?:env::var(?:_os)?\(|env = )"([A-Z][A-Z0-9_]*)""#).unwrap();
        let ours = regex::Regex::new(r#""(ARTEMIS_TRANSFER_[A-Z0-9_]*)"#).unwrap();
        // `ARTEMIS_TRANSFER_CREDENTIALS__<REF>__USER` names every `ARTEMIS_TRANSFER_CREDENTIALS__…__USER`.
        let templates: Vec<regex::Regex> = PROCESS_VARIABLES
            .iter()
            .filter(|v| v.name.contains("<REF>"))
            .map(|v| regex::Regex::new(&format!("^{}$", v.name.replace("<REF>", "[A-Z0-9_]+"))).unwrap())
            .collect();
        let mut files = vec![repository().join("src")];
        let mut checked = 0;
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Tests name made-up variables on purpose.
            let text = text.split("#[cfg(test)]").next().unwrap_or_default();
            for name in read.captures_iter(text).chain(ours.captures_iter(text)).map(|c| c[1].to_owned()) {
                let named = reference.contains(&name) || templates.iter().any(|t| t.is_match(&name));
                assert!(named, "{} reads {name}, which {PATH} does not name", path.display());
                checked += 1;
            }
        }
        assert!(checked > 10, "{checked}");
    }

    #[test]
    fn a_key_is_set_by_the_variable_the_reference_names() {
        let config = Config::from_sources(None, [(variable_of("worker", "concurrency"), "9".to_owned())]).unwrap();
        assert_eq!(config.worker.concurrency, 9);
    }
}
