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

/// Installs the global subscriber (once; later calls do nothing). The level comes from `RUST_LOG`,
/// default `info`.
pub fn init(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
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
