//! The `liaison` binary: parse the command line, run, map the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser as _;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = liaison::cli::Cli::parse();
    match liaison::cli::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Not `eprintln!`: a closed stderr must not turn a clean failure into a panic.
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
