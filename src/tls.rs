//! TLS plumbing: the process-wide rustls provider for outbound clients, and the server side when
//! `[tls]` names a certificate and key (then every route, gRPC included, is served over TLS on the
//! one port, with ALPN `h2` and `http/1.1`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// Longest a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Makes ring the process-wide rustls provider (reqwest is built without one, to keep aws-lc out of
/// the build). Idempotent; call before creating any HTTP client or TLS acceptor.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The acceptor for a PEM certificate chain and PEM private key (PKCS#8, PKCS#1 or SEC1).
pub fn acceptor(cert_file: &Path, key_file: &Path) -> anyhow::Result<TlsAcceptor> {
    install_crypto_provider();
    let certs = CertificateDer::pem_file_iter(cert_file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("Could not read the certificates in {}", cert_file.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{} holds no PEM certificate", cert_file.display());
    }
    let key = PrivateKeyDer::from_pem_file(key_file)
        .with_context(|| format!("Could not read the private key in {}", key_file.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("The TLS certificate and key do not go together")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves `router` over TLS until `shutdown`, then waits for open connections to finish (long
/// polls and streams end on shutdown themselves).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    acceptor: TlsAcceptor,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let graceful = GracefulShutdown::new();
    let builder = Builder::new(TokioExecutor::new());
    loop {
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
        let _ = tcp.set_nodelay(true);
        let (acceptor, builder, watcher) = (acceptor.clone(), builder.clone(), graceful.watcher());
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "TLS handshake failed."),
                Err(_) => return tracing::debug!(%peer, "TLS handshake timed out."),
            };
            let connection = builder
                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                .into_owned();
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!(%peer, error = %e, "Connection ended with an error.");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
