//! The exit status of every command: one table, here. `--help` (of the binary and of every command), the README's
//! line and docs/cli.md are generated from it or checked against it by tests, so they cannot drift.
//!
//! Five codes, so a script can tell apart what it must handle differently: a failure worth retrying (1), a command
//! line to fix (2), a result to look at (3), and a no from the product that retrying will not change (4).

use std::fmt::Write;

/// How a command ended, as its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exit {
    /// Done.
    Success,
    /// Something went wrong: the database or a broker did not answer, the configuration or a file is bad.
    Failure,
    /// The command line is malformed (clap's own status for it).
    Usage,
    /// Done, but not as hoped: a run ended without succeeding, or some node could not be checked.
    NotAsHoped,
    /// The product said no: a finding that blocks, a missing grant, a confirmation not given, an unknown or
    /// invisible run or cluster.
    Refused,
}

impl Exit {
    /// Every status, in the order of its code.
    pub const ALL: [Exit; 5] = [Exit::Success, Exit::Failure, Exit::Usage, Exit::NotAsHoped, Exit::Refused];

    /// The process's exit code.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::NotAsHoped => 3,
            Exit::Refused => 4,
        }
    }

    /// Its name, as the README and the help say it.
    pub const fn name(self) -> &'static str {
        match self {
            Exit::Success => "success",
            Exit::Failure => "failure",
            Exit::Usage => "usage",
            Exit::NotAsHoped => "not as hoped",
            Exit::Refused => "refused",
        }
    }

    /// What it means, in a few words.
    pub const fn means(self) -> &'static str {
        match self {
            Exit::Success => "done",
            Exit::Failure => "something needed did not answer or was wrong (the database, a broker, the configuration)",
            Exit::Usage => "a malformed command line (an unknown flag, a missing or bad argument)",
            Exit::NotAsHoped => "done, but a run ended without succeeding, or some node could not be checked",
            Exit::Refused => {
                "the product said no (a finding that blocks, a missing grant, a confirmation not given, an unknown \
                 or invisible run or cluster)"
            }
        }
    }

    /// The commands and situations that end with it, for docs/cli.md.
    pub const fn examples(self) -> &'static str {
        match self {
            Exit::Success => {
                "a run executed, a preview that can start, `watch` of a run that ended succeeded, partial or \
                 returned, output cut short by a reader that went away (`head`)"
            }
            Exit::Failure => {
                "the database out of reach or not migrated, a broker not answering, a bad configuration, a file that \
                 cannot be read"
            }
            Exit::Usage => "an unknown flag, a missing argument, a malformed `CLUSTER/NODE/QUEUE`, no operator named",
            Exit::NotAsHoped => {
                "`watch`, `execute --watch`: the run ended stopped, interrupted, failed or unproven; `preview`: a \
                 node did not answer; `orphans list`: some node could not be checked"
            }
            Exit::Refused => {
                "`preview`: a finding refuses the run; a missing grant; `execute` without the plan hash, \
                 acknowledgements or confirmation it needs; `return` without `--confirm`; an unknown run (every \
                 command); a cluster registered twice"
            }
        }
    }

    /// `0 success, 1 failure, …`: the README's words.
    pub fn summary() -> String {
        Exit::ALL.iter().map(|e| format!("{} {}", e.code(), e.name())).collect::<Vec<_>>().join(", ")
    }

    /// The `Exit status:` paragraph every `--help` ends with.
    pub fn help() -> String {
        let mut s = String::from("Exit status:");
        for e in Exit::ALL {
            let _ = write!(s, "\n  {}  {}: {}", e.code(), e.name(), e.means());
        }
        s.push_str("\nConventions (exit status, output, JSON, who acts): docs/cli.md.");
        s
    }

    /// The table of docs/cli.md, one row a status.
    pub fn markdown_table() -> String {
        let mut s = String::from("| Code | Name | Means | Examples |\n|---|---|---|---|\n");
        for e in Exit::ALL {
            let _ = writeln!(s, "| {} | {} | {} | {} |", e.code(), e.name(), e.means(), e.examples());
        }
        s
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}

/// `command` and every command under it, each `--help` ending with [`Exit::help`] (after the words it already
/// had there).
pub fn with_exit_status(command: clap::Command) -> clap::Command {
    let after = match command.get_after_help() {
        Some(own) => format!("{own}\n\n{}", Exit::help()),
        None => Exit::help(),
    };
    command.after_help(after).mut_subcommands(with_exit_status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_in_order() {
        for (i, e) in Exit::ALL.iter().enumerate() {
            assert_eq!(e.code() as usize, i, "{e:?}");
        }
    }

    /// clap exits with its own status on a malformed command line: it must be ours for usage.
    #[test]
    fn a_malformed_command_line_exits_with_the_usage_status() {
        use clap::Parser;
        let err = crate::cli::Cli::try_parse_from(["artemis-transfer", "runs", "list", "--no-such-flag"]).unwrap_err();
        assert_eq!(err.exit_code(), i32::from(Exit::Usage.code()));
    }

    /// The lines of docs/cli.md between which the table stands.
    const TABLE_STARTS: &str = "<!-- The exit table, generated from src/cli/exit.rs: do not edit. To regenerate: \
                                `ARTEMIS_TRANSFER_BLESS=1 cargo test --lib cli::exit`. -->\n";
    const TABLE_ENDS: &str = "<!-- end of the exit table -->\n";

    #[test]
    fn the_readme_and_docs_cli_state_the_table() {
        let readme = include_str!("../../README.md");
        let summary = format!("exit status: {}", Exit::summary());
        assert!(readme.contains(&summary), "README.md lacks {summary:?}");
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
        let page = std::fs::read_to_string(&path).unwrap();
        let start =
            page.find(TABLE_STARTS).expect("docs/cli.md marks where the exit table starts") + TABLE_STARTS.len();
        let end = page[start..].find(TABLE_ENDS).expect("docs/cli.md marks where the exit table ends") + start;
        let table = Exit::markdown_table();
        if std::env::var_os("ARTEMIS_TRANSFER_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(&path, format!("{}{table}{}", &page[..start], &page[end..])).unwrap();
        } else {
            assert_eq!(&page[start..end], table, "docs/cli.md's exit table is not the code's: regenerate it");
        }
    }
}
