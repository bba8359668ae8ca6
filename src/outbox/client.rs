//! The outbound HTTP client: hostile-network code. Every address it connects to passes the SSRF
//! rule (`domain::address`): a literal address in the URL before sending, a name through a
//! resolver that drops every refused address, so the check is on the very addresses connected to
//! (DNS rebinding cannot slip a private address in after a check). No proxy (it would resolve for
//! us), no redirects, a connect and a total timeout, and at most [`MAX_RESPONSE_BYTES`] of a
//! response read.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::HeaderMap;

use crate::domain::address::AddressPolicy;
use crate::service::{SendFailure, SendResult};

/// Most bytes of a response body read (the rest is dropped with the connection).
pub const MAX_RESPONSE_BYTES: usize = 4096;

/// Why the resolver refused a name: every address it resolved to is non-global.
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves only to refused addresses ({addrs})")]
struct RefusedName {
    host: String,
    addrs: String,
}

/// Resolves with the system resolver, then keeps only allowed addresses.
struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| policy.check(a.ip()).is_ok())
                .collect();
            if allowed.is_empty() {
                let addrs = found
                    .iter()
                    .map(|a| a.ip().to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Box::new(RefusedName { host, addrs }) as _);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The SSRF-safe client. Cheap to clone.
#[derive(Clone)]
pub struct OutboundClient {
    http: reqwest::Client,
    policy: Arc<AddressPolicy>,
}

impl OutboundClient {
    pub fn new(
        policy: AddressPolicy,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> anyhow::Result<OutboundClient> {
        crate::tls::install_crypto_provider();
        let policy = Arc::new(policy);
        let http = reqwest::Client::builder()
            .dns_resolver(GuardedResolver {
                policy: policy.clone(),
            })
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(connect_timeout)
            .timeout(timeout)
            .tcp_nodelay(true)
            .user_agent(concat!("liaison/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(OutboundClient { http, policy })
    }

    /// POSTs `body` to `url`; never follows a redirect (a 3xx is returned as it is).
    pub async fn post(&self, url: &str, headers: HeaderMap, body: Vec<u8>) -> SendResult {
        let parsed = match reqwest::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => u,
            Ok(_) => {
                return SendResult::Failed(SendFailure::InvalidUrl(format!("{url}: not http(s)")));
            }
            Err(e) => return SendResult::Failed(SendFailure::InvalidUrl(format!("{url}: {e}"))),
        };
        if let Some(host) = parsed.host_str()
            && let Ok(ip) = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
            && let Err(kind) = self.policy.check(ip)
        {
            return SendResult::Failed(SendFailure::RefusedAddress(format!(
                "{ip} is a {} address",
                kind.as_str()
            )));
        }
        let response = match self
            .http
            .post(parsed)
            .headers(headers)
            .body(body)
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => return SendResult::Failed(classify(&e)),
        };
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        drain(response).await;
        SendResult::Status { code, retry_after }
    }
}

/// Reads at most [`MAX_RESPONSE_BYTES`] of the body (so a small answer frees the connection for
/// reuse), then drops the rest.
async fn drain(mut response: reqwest::Response) {
    let mut read = 0;
    while read < MAX_RESPONSE_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            _ => return,
        }
    }
}

/// `Retry-After`: delay-seconds or an HTTP date.
fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let delta = at.timestamp() - chrono::Utc::now().timestamp();
    Some(Duration::from_secs(u64::try_from(delta).unwrap_or(0)))
}

fn classify(e: &reqwest::Error) -> SendFailure {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(refused) = s.downcast_ref::<RefusedName>() {
            return SendFailure::RefusedAddress(refused.to_string());
        }
        source = s.source();
    }
    let text = error_chain(e);
    if e.is_timeout() {
        SendFailure::Timeout(text)
    } else if e.is_connect() {
        SendFailure::Connect(text)
    } else {
        SendFailure::Request(text)
    }
}

/// The error and its causes on one line (reqwest's top-level message says little).
fn error_chain(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out.chars().take(500).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(120)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
