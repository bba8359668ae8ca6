//! Logging setup for `serve`: `tracing` to stderr, text or JSON, through a writer that ignores
//! write errors. A server whose stderr is a closed pipe (a supervisor gone, `2>&-`) must go on
//! serving and still stop on SIGTERM: a log line that cannot be written is dropped, never a panic.

use std::io::{self, Write};

use crate::config::LogFormat;

/// Stderr, with every write reported as done whatever happened (EPIPE included).
pub struct LossyStderr;

impl Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

/// The filter when `RUST_LOG` is unset: liaison's own lines (the access log included) at INFO,
/// every library (rmcp, hyper, sqlx, …) at WARN.
pub const DEFAULT_FILTER: &str = "warn,liaison=info";

/// Installs the global subscriber (once; later calls do nothing). The filter comes from `RUST_LOG`,
/// default [`DEFAULT_FILTER`]. Colours only when stderr is a terminal: a file, a pipe or a log
/// collector gets plain text.
pub fn init(format: LogFormat) {
    use std::io::IsTerminal as _;
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::stderr().is_terminal())
        .with_writer(|| LossyStderr)
        // Its own report of a failed write goes to stderr with `eprintln!`, which panics there.
        .log_internal_errors(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Prints a line on stdout, ignoring a closed stdout (the server's start-up messages).
pub fn say(text: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}
