//! One connection: the TLS handshake (when configured), hyper's HTTP/1.1 or HTTP/2 serving, and a
//! watchdog that closes the connection gracefully when it has had no request in flight for too
//! long (before its first request: `header_read_timeout`; later: `idle_timeout`) or when the
//! server shuts down. A request is in flight from the moment hyper hands it over until its
//! response body has been sent or dropped, so SSE streams and long-polls count.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::ServerSettings;

/// What every connection task shares.
pub(super) struct Server {
    pub(super) builder: Builder<TokioExecutor>,
    pub(super) router: Router,
    pub(super) tls: Option<TlsAcceptor>,
    pub(super) settings: ServerSettings,
    pub(super) shutdown: CancellationToken,
}

impl Server {
    /// Serves one accepted connection to its end.
    pub(super) async fn connection(&self, tcp: TcpStream, peer: SocketAddr) {
        // Each way is boxed at its own size, so a plain connection's task holds no room for a TLS
        // handshake and session it never has: 4.5 KiB became 2.2 KiB a connection, which counts
        // with 10,000 long-polls open.
        let Some(acceptor) = &self.tls else {
            return Box::pin(self.serve(tcp, peer)).await;
        };
        let handshake = Box::pin(tokio::time::timeout(
            self.settings.tls_handshake_timeout,
            acceptor.accept(tcp),
        ));
        let tls = tokio::select! {
            done = handshake => match done {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "TLS handshake failed."),
                Err(_) => return tracing::debug!(%peer, "TLS handshake timed out."),
            },
            () = self.shutdown.cancelled() => return,
        };
        Box::pin(self.serve(tls, peer)).await
    }

    async fn serve<I>(&self, io: I, peer: SocketAddr)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::default());
        let service = TowerToHyperService::new(Tracked {
            router: self.router.clone(),
            peer,
            activity: activity.clone(),
        });
        let conn = self
            .builder
            .serve_connection_with_upgrades(TokioIo::new(io), service);
        tokio::pin!(conn);
        let mut closing = false;
        loop {
            let quiet = activity.in_flight.load(Ordering::Acquire) == 0 && !closing;
            let limit = if activity.started.load(Ordering::Acquire) == 0 {
                self.settings.header_read_timeout
            } else {
                self.settings.idle_timeout
            };
            let idle = async {
                if quiet {
                    tokio::time::sleep(limit).await
                } else {
                    std::future::pending().await
                }
            };
            tokio::select! {
                ended = conn.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!(%peer, error = %e, "Connection ended with an error.");
                    }
                    return;
                }
                () = activity.changed.notified() => {}
                () = idle => {
                    tracing::debug!(%peer, "Closing an idle connection.");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
                () = self.shutdown.cancelled(), if !closing => {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

/// Requests in flight on one connection.
#[derive(Default)]
struct Activity {
    /// Requests handed over whose response body is not finished.
    in_flight: AtomicUsize,
    /// Requests handed over so far.
    started: AtomicUsize,
    /// Woken at every change of `in_flight`, so the watchdog restarts its timer.
    changed: Notify,
}

/// Counts one request in flight while alive.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: &Arc<Activity>) -> Self {
        activity.started.fetch_add(1, Ordering::AcqRel);
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        activity.changed.notify_one();
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_one();
    }
}

/// The router, with the client's address in each request and each response body holding the
/// request's [`InFlight`] mark.
#[derive(Clone)]
struct Tracked {
    router: Router,
    peer: SocketAddr,
    activity: Arc<Activity>,
}

impl<B> tower_service::Service<Request<B>> for Tracked
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Response<Body>, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let mark = InFlight::begin(&self.activity);
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(ConnectInfo(self.peer));
        // A Router is always ready.
        let response = tower_service::Service::call(&mut self.router.clone(), req);
        Box::pin(async move {
            let response = response.await?;
            Ok(super::body::hold(response, mark))
        })
    }
}
