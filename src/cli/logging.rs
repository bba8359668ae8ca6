//! Logging setup for `serve`: `tracing` to stderr, text or JSON, through a writer that ignores
//! write errors. A server whose stderr is a closed pipe (a supervisor gone, `2>&-`) must go on
//! serving and still stop on SIGTERM: a log line that cannot be written is dropped, never a panic.
//!
//! Lines at INFO and below (the access log: one per request) are written behind: the request's
//! thread appends its line to a buffer and a thread of the log's own writes what gathered, at
//! most `GATHER` (2 ms) later, in one `write`. One write per request was 8% of an A2A intake's
//! server CPU at 64 in flight (`docs/performance.md`). A warning or an error is written at once,
//! after whatever was buffered before it, so the order of lines is kept and nothing the operator
//! must see waits; so is everything when the buffer holds `MAX_BUFFERED` (256 KiB): a stalled
//! stderr slows the server down rather than growing its memory. The lines a `kill -9` can lose
//! are those of the last 2 ms; `serve` flushes before it returns.

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

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

/// Longest a line at INFO or below waits in the buffer before it is written.
const GATHER: Duration = Duration::from_millis(2);

/// Bytes buffered beyond which a line is written at once, with everything before it.
const MAX_BUFFERED: usize = 256 * 1024;

/// Log lines on their way to a sink, written behind by a thread of their own ([`Lines::start`]).
struct Lines {
    /// What was written and not yet handed to the sink, and whether the writing thread sleeps.
    buffer: Mutex<Pending>,
    wake: Condvar,
    /// Held while bytes go to the sink: whoever takes the buffer writes it before anyone else
    /// writes, so lines reach the sink in the order they were buffered.
    sink: Mutex<Box<dyn Write + Send>>,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    idle: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Lines {
    /// Lines written to `sink` by a thread started here (named `log-writer`).
    fn start(sink: Box<dyn Write + Send>) -> Arc<Lines> {
        let lines = Lines::unwritten(sink);
        let writer = lines.clone();
        std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || writer.write_behind())
            .expect("the log's thread starts");
        lines
    }

    /// Lines nothing writes behind (tests: only a warning, a full buffer or `flush` write).
    fn unwritten(sink: Box<dyn Write + Send>) -> Arc<Lines> {
        Arc::new(Lines {
            buffer: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            sink: Mutex::new(sink),
        })
    }

    /// The writing thread: sleeps until a line is buffered, lets others gather for [`GATHER`],
    /// writes them all.
    fn write_behind(&self) {
        loop {
            {
                let mut pending = lock(&self.buffer);
                while pending.bytes.is_empty() {
                    pending.idle = true;
                    pending = self.wake.wait(pending).unwrap_or_else(|e| e.into_inner());
                }
                pending.idle = false;
            }
            std::thread::sleep(GATHER);
            self.flush();
        }
    }

    /// Writes what is buffered, then `line` (both may be empty).
    fn write_now(&self, line: &[u8]) {
        let mut sink = lock(&self.sink);
        let taken = std::mem::take(&mut lock(&self.buffer).bytes);
        let _ = sink.write_all(&taken);
        let _ = sink.write_all(line);
        let _ = sink.flush();
    }

    /// Writes everything buffered so far.
    fn flush(&self) {
        self.write_now(&[]);
    }

    /// Buffers `line`, or writes it at once (after what is buffered) when `urgent` or when the
    /// buffer is full.
    fn push(&self, line: &[u8], urgent: bool) {
        if !urgent {
            let mut pending = lock(&self.buffer);
            if pending.bytes.len() + line.len() <= MAX_BUFFERED {
                pending.bytes.extend_from_slice(line);
                if pending.idle {
                    pending.idle = false;
                    self.wake.notify_one();
                }
                return;
            }
        }
        self.write_now(line);
    }
}

/// One event's line, handed to [`Lines`] whole (the formatter writes an event in one call, and
/// this keeps it whole whatever the formatter does).
struct LineWriter<'a> {
    lines: &'a Lines,
    urgent: bool,
    line: Vec<u8>,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.lines.push(&self.line, self.urgent);
        }
    }
}

/// The writer of the log's lines: warnings and errors are urgent.
#[derive(Clone)]
struct LinesWriter(Arc<Lines>);

impl<'a> MakeWriter<'a> for LinesWriter {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            lines: &self.0,
            urgent: true,
            line: Vec::new(),
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        LineWriter {
            lines: &self.0,
            urgent: *meta.level() <= Level::WARN,
            line: Vec::new(),
        }
    }
}

/// The log of this process, once [`init`] ran.
static LOG: OnceLock<Arc<Lines>> = OnceLock::new();

/// Writes the log lines still buffered (`serve` calls it before it returns).
pub fn flush() {
    if let Some(lines) = LOG.get() {
        lines.flush();
    }
}

/// The filter when `RUST_LOG` is unset, as a literal (`--help` splices it into its text).
macro_rules! default_filter {
    () => {
        "warn,liaison=info"
    };
}
pub(crate) use default_filter;

/// The filter when `RUST_LOG` is unset: liaison's own lines (the access log included) at INFO,
/// every library (rmcp, hyper, sqlx, …) at WARN.
pub const DEFAULT_FILTER: &str = default_filter!();

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
    let log = LOG
        .get_or_init(|| {
            // A panic's message goes to stderr itself: the lines before it go first.
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                flush();
                previous(info);
            }));
            Lines::start(Box::new(LossyStderr))
        })
        .clone();
    let lines = tracing_subscriber::fmt::layer()
        .with_ansi(io::stderr().is_terminal())
        .with_writer(LinesWriter(log))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8(lock(&self.0).clone()).unwrap()
        }
    }

    /// Runs `events` with the log's formatter writing to `lines` (as `init` sets it up).
    fn logged(lines: &Arc<Lines>, events: impl FnOnce()) {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(LinesWriter(lines.clone()))
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .with_level(false)
            .with_max_level(Level::INFO)
            .finish();
        tracing::subscriber::with_default(subscriber, events);
    }

    fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn info_lines_are_written_behind_and_a_warning_at_once_after_them_in_order() {
        let sink = Shared::default();
        let lines = Lines::start(Box::new(sink.clone()));
        // The writing thread sleeps; the first line wakes it and reaches the sink by itself.
        logged(&lines, || tracing::info!("one"));
        until("the first line written behind", || sink.text() == "one\n");
        // Lines buffered while the sink is busy, then a warning: it is written at once, after them.
        let busy = lock(&lines.sink);
        logged(&lines, || {
            tracing::info!("two");
            tracing::info!("three");
        });
        assert_eq!(
            sink.text(),
            "one\n",
            "nothing is written while the sink is busy"
        );
        drop(busy);
        logged(&lines, || tracing::warn!("careful"));
        assert_eq!(sink.text(), "one\ntwo\nthree\ncareful\n");
        logged(&lines, || tracing::info!("four"));
        until("a later line written behind", || {
            sink.text().ends_with("careful\nfour\n")
        });
        // `flush` writes what is buffered at once.
        let busy = lock(&lines.sink);
        logged(&lines, || tracing::info!("five"));
        drop(busy);
        lines.flush();
        assert!(sink.text().ends_with("four\nfive\n"), "{}", sink.text());
    }

    #[test]
    fn a_full_buffer_is_written_at_once_by_the_line_that_would_overflow_it() {
        let sink = Shared::default();
        // No thread writes behind: what reaches the sink was written by a line itself.
        let lines = Lines::unwritten(Box::new(sink.clone()));
        let long = "x".repeat(1023);
        logged(&lines, || {
            for _ in 0..MAX_BUFFERED / 1024 {
                tracing::info!("{long}");
            }
        });
        assert_eq!(lock(&lines.buffer).bytes.len(), MAX_BUFFERED);
        assert_eq!(sink.text(), "");
        // The next line does not grow the buffer past its bound: it writes everything.
        logged(&lines, || tracing::info!("last"));
        assert!(lock(&lines.buffer).bytes.is_empty());
        let text = sink.text();
        assert_eq!(text.len(), MAX_BUFFERED + 5);
        assert!(text.ends_with("x\nlast\n"));
        // A warning writes the buffered lines before it, even one.
        logged(&lines, || {
            tracing::info!("before");
            tracing::warn!("after");
        });
        assert!(sink.text().ends_with("last\nbefore\nafter\n"));
    }
}
