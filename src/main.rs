//! The `artemis-transfer` binary: parse the command line, set up logging, run, map the result to an exit
//! code. Everything else lives in the library (`src/cli` for the commands).

use std::process::ExitCode;

use artemis_transfer::cli::{self, Cli};
use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::init_tracing(cli.log_format);
    match cli::run(cli).await {
        Ok(code) => code,
        // `| head` closed the pipe: what was wanted was read.
        Err(e) if cli::terminal::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // The whole chain once, on one line (ripgrep's convention).
            eprintln!("artemis-transfer: {}", cli::terminal::shown(&cli::error_chain(&e)));
            ExitCode::FAILURE
        }
    }
}
