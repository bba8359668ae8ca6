//! TLS plumbing shared by every outbound client.

/// Makes ring the process-wide rustls provider (reqwest is built without one, to keep aws-lc out of
/// the build). Idempotent; call before creating any HTTP client.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
