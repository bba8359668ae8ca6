//! The listener: one accept loop serving plain HTTP (HTTP/1.1 and h2c) or, with `[tls]`, TLS (ALPN
//! `h2` and `http/1.1`) on the one port, with the connection bounds of `[server]`.
//!
//! - At most `max_connections` connections at once (TLS handshakes included). At the cap the loop
//!   stops accepting: new connections wait in the kernel's accept queue until one closes, and one
//!   warning line says so (at most one a minute). Slow or silent clients cannot keep their slots:
//! - a connection must deliver its first request head within `header_read_timeout` (a TLS
//!   handshake within `tls_handshake_timeout`); on HTTP/1.1 the wait for each following request
//!   head counts as reading headers too;
//! - a connection with no request in flight for `idle_timeout` is closed (HTTP/2 gets a GOAWAY);
//! - HTTP/2 connections are pinged every `http2_keep_alive` and closed when a ping goes
//!   unanswered as long (gRPC and h2 streams that wait on humans survive idle proxies).
//!
//! - one client address holds at most `max_connections_per_address` of them, and the last few
//!   free slots go only to addresses holding none ([`share`]); a connection refused its share is
//!   closed at once, counted in `liaison_connections_refused_total{reason}`.
//!
//! So a flood of idle connections delays a well-behaved client by at most `header_read_timeout`
//! rather than starving it. At shutdown the loop stops accepting, every connection is asked to
//! close gracefully (long-polls and streams end on the service's shutdown), and the drain waits
//! at most [`DRAIN_TIMEOUT`].
//!
//! Also the two other pieces of networking below the service: [`tls`] (the process's rustls
//! provider and the listener's acceptor) and [`outbound`] (the SSRF-safe client of every
//! server-side request to the outside). None of it knows the service or a front.

mod body;
mod conn;
pub mod outbound;
mod share;
pub mod tls;

pub use body::hold;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// Longest wait for open connections to close after shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The default bound of hyper's HTTP/1.1 buffers, and so of a request head: 8 KiB, as Tomcat's
/// and Jetty's. hyper starts its read buffer at 8 KiB and doubles it when a read would not fit;
/// under any larger bound, the first read of every connection (the 24 bytes hyper-util reads to
/// tell HTTP/2 from HTTP/1.1) made it 16 KiB, for as long as the connection lived: 4.6 KiB more
/// of resident memory for each waiting long-poll (10,000 on their own connections: 333 → 289
/// MiB). A longer head is refused with `431 Request Header Fields Too Large`.
pub const DEFAULT_MAX_REQUEST_HEAD: usize = 8 * 1024;

/// Least time between two "connection cap reached" warnings.
const CAP_WARNING_EVERY: Duration = Duration::from_secs(60);

/// Connection bounds (`[server]` in the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    /// Connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// Connections one client address (an IPv4 address, an IPv6 /64) may hold at once.
    pub max_connections_per_address: usize,
    /// Longest time to deliver a request head (the first one, and on HTTP/1.1 each next one).
    pub header_read_timeout: Duration,
    /// A connection with no request in flight this long is closed.
    pub idle_timeout: Duration,
    /// Longest TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Interval of HTTP/2 keep-alive pings, and how long an answer may take.
    pub http2_keep_alive: Duration,
    /// Bytes of the largest HTTP/1.1 request head, and of hyper's buffers (8 KiB at least).
    pub max_request_head: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            max_connections: 512,
            max_connections_per_address: 64,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            tls_handshake_timeout: Duration::from_secs(10),
            http2_keep_alive: Duration::from_secs(20),
            max_request_head: DEFAULT_MAX_REQUEST_HEAD,
        }
    }
}

/// Serves `router` on `listener` until `shutdown`, then drains.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    settings: ServerSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let slots = Arc::new(Semaphore::new(settings.max_connections));
    let shares = share::Shares::new(
        settings.max_connections_per_address,
        share::reserve(settings.max_connections),
    );
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(settings.header_read_timeout)
        .max_buf_size(settings.max_request_head);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(settings.http2_keep_alive)
        .keep_alive_timeout(settings.http2_keep_alive);
    let server = Arc::new(conn::Server {
        builder,
        router,
        tls,
        settings: settings.clone(),
        shutdown: shutdown.clone(),
    });
    let mut last_warning: Option<Instant> = None;
    loop {
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if last_warning.is_none_or(|t| t.elapsed() >= CAP_WARNING_EVERY) {
                    last_warning = Some(Instant::now());
                    tracing::warn!(
                        max_connections = settings.max_connections,
                        "Connection cap reached; new connections wait until one closes (server.max_connections)."
                    );
                }
                tokio::select! {
                    permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
                    () = shutdown.cancelled() => break,
                }
            }
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "Could not accept a connection.");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let share = match shares.take(peer.ip(), slots.available_permits()) {
            Ok(share) => share,
            Err(refusal) => {
                // Closed at once: the slot goes back to the next connection in the queue.
                crate::metrics::get().connection_refused(refusal.label());
                tracing::debug!(%peer, reason = refusal.label(), "Connection refused its share.");
                drop(tcp);
                continue;
            }
        };
        // Small answers (a JSON-RPC result, an SSE event) go out at once, not after a delayed ACK.
        let _ = tcp.set_nodelay(true);
        let server = server.clone();
        tokio::spawn(async move {
            server.connection(tcp, peer).await;
            drop((share, permit));
        });
    }
    drop(listener);
    drain(&slots, settings.max_connections).await;
    Ok(())
}

/// Waits until every connection has given its slot back, at most [`DRAIN_TIMEOUT`].
async fn drain(slots: &Semaphore, max: usize) {
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    if tokio::time::timeout(DRAIN_TIMEOUT, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            open = max - slots.available_permits(),
            "Connections still open after the drain timeout; stopping anyway."
        );
    }
}

/// The address a request came from (in the request's extensions).
pub type ClientAddr = axum::extract::ConnectInfo<SocketAddr>;
