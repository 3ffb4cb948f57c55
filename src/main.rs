//! The `artemis-transfer` binary: parse the command line, set up logging, run, map the result to an exit
//! code. Everything else lives in the library (`src/cli` for the commands).

use std::process::ExitCode;

use artemis_transfer::cli::{self, Cli, Exit};
use clap::FromArgMatches;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::from_arg_matches(&cli::command().get_matches()).unwrap_or_else(|e| e.exit());
    cli::init_tracing(cli.log_format);
    match cli::run(cli).await {
        Ok(exit) => exit.into(),
        // `| head` closed the pipe: what was wanted was read (docs/cli.md says why 0 and not 141).
        Err(e) if cli::terminal::is_broken_pipe(&e) => Exit::Success.into(),
        Err(e) => {
            // The whole chain once, on one line (ripgrep's convention); a refusal says it is one.
            let exit = e.exit();
            let said = if exit == Exit::Refused { "refused" } else { "artemis-transfer" };
            eprintln!("{said}: {}", cli::terminal::shown(&cli::error_chain(&e)));
            exit.into()
        }
    }
}
