//! The `liaison` binary: parse the command line, run, map the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser as _;

/// mimalloc rather than glibc's allocator. A task intake allocates about 460 times; with glibc
/// those were about a fifth of the server's instructions (`callgrind`: 476k instructions per
/// intake against 422k with mimalloc), largely its slow paths: chunks freed on another thread
/// than the one that allocated them (the writer's thread and the runtime's), and requests above
/// its per-thread cache's 1 KiB. Measured side by side (docs/performance.md): 11–33% more
/// intakes per second at 64 in flight on SQLite. Built without transparent huge pages
/// (`no_thp`): with them its first arena costs 8 MiB more at rest (36.5 against 28.7 MiB).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
