//! TLS plumbing: the process-wide rustls provider for outbound clients, and the server's acceptor
//! when `[tls]` names a certificate and key (then `net` serves every route, gRPC included, over TLS
//! on the one port, with ALPN `h2` and `http/1.1`).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

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
