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

/// Installs the global subscriber (once; later calls do nothing): the log lines to stderr, their
/// filter from `RUST_LOG` (default [`DEFAULT_FILTER`]), and, when an OTLP endpoint is configured,
/// the layer that exports the spans of [`crate::telemetry`] (its own filter, so that `RUST_LOG`
/// never hides a span from the traces). Colours only when stderr is a terminal: a file, a pipe or
/// a log collector gets plain text. Answers the exporter to shut down when serving ends.
pub fn init(
    format: LogFormat,
    telemetry: &crate::telemetry::Settings,
) -> anyhow::Result<Option<crate::telemetry::Exporter>> {
    use std::io::IsTerminal as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _, layer::SubscriberExt as _};
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let lines = tracing_subscriber::fmt::layer()
        .with_ansi(io::stderr().is_terminal())
        .with_writer(|| LossyStderr)
        // Its own report of a failed write goes to stderr with `eprintln!`, which panics there.
        .log_internal_errors(false);
    let lines = match format {
        LogFormat::Text => lines.boxed(),
        LogFormat::Json => lines.json().boxed(),
    };
    let (exporter, spans) = match crate::telemetry::start(telemetry)? {
        Some((exporter, layer)) => (Some(exporter), Some(layer)),
        None => (None, None),
    };
    let _ = tracing_subscriber::registry()
        .with(spans)
        .with(lines.with_filter(filter))
        .try_init();
    Ok(exporter)
}

/// Prints a line on stdout, ignoring a closed stdout (the server's start-up messages).
pub fn say(text: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}
