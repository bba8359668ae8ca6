//! The outbound HTTP client: hostile-network code. Every address it connects to passes the SSRF
//! rule (`domain::address`): a literal address in the URL before sending, a name through a
//! resolver that drops every refused address, so the check is on the very addresses connected to
//! (DNS rebinding cannot slip a private address in after a check). No proxy (it would resolve for
//! us), no redirects, a connect and a total timeout, and at most [`MAX_RESPONSE_BYTES`] of a
//! delivery's response read.
//!
//! The outbound bridge (`crate::remote`) uses the same client for Agent Cards, key sets, OAuth2
//! tokens and A2A calls: [`OutboundClient::request_bounded`] reads a whole answer up to a cap
//! given by the caller (larger is an error, never a larger buffer); [`OutboundClient::open_stream`]
//! opens a response that is read as it comes (SSE), with the connect timeout and an idle timeout
//! between reads instead of a total one; [`OutboundClient::connect_tcp`] opens a TCP connection
//! under the same address rule for the gRPC client, which speaks HTTP/2 itself.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::HeaderMap;

use crate::domain::address::AddressPolicy;
use crate::domain::delivery::{SendFailure, SendResult};

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

/// Longest wait for the next bytes of a stream (SSE) before it counts as dropped.
pub const STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// A response read whole (up to the caller's cap).
#[derive(Debug, Clone)]
pub struct Fetched {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// `Retry-After`, when the server sent one.
    pub retry_after: Option<Duration>,
}

/// Why a bounded request got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("{} ({})", .0.message(), .0.class())]
    Send(SendFailure),
    #[error("the answer is larger than {limit} bytes")]
    TooLarge { limit: usize },
}

/// The SSRF-safe client. Cheap to clone.
#[derive(Clone)]
pub struct OutboundClient {
    http: reqwest::Client,
    /// The same guard without a total timeout, for responses read as they come.
    streams: reqwest::Client,
    policy: Arc<AddressPolicy>,
    connect_timeout: Duration,
    timeout: Duration,
    stream_idle: Duration,
}

impl OutboundClient {
    pub fn new(
        policy: AddressPolicy,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> anyhow::Result<OutboundClient> {
        Self::with_stream_idle(policy, connect_timeout, timeout, STREAM_IDLE_TIMEOUT)
    }

    /// [`OutboundClient::new`] with another idle timeout for streams.
    pub fn with_stream_idle(
        policy: AddressPolicy,
        connect_timeout: Duration,
        timeout: Duration,
        stream_idle: Duration,
    ) -> anyhow::Result<OutboundClient> {
        crate::net::tls::install_crypto_provider();
        let policy = Arc::new(policy);
        let builder = || {
            #[allow(clippy::disallowed_methods)] // the one place the server builds a client
            reqwest::Client::builder()
                .dns_resolver(GuardedResolver {
                    policy: policy.clone(),
                })
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(connect_timeout)
                .tcp_nodelay(true)
                .user_agent(concat!("liaison/", env!("CARGO_PKG_VERSION")))
        };
        let http = builder().timeout(timeout).build()?;
        let streams = builder().read_timeout(stream_idle).build()?;
        Ok(OutboundClient {
            http,
            streams,
            policy,
            connect_timeout,
            timeout,
            stream_idle,
        })
    }

    /// The connect timeout (the gRPC client's too).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The total timeout of a request read whole.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The longest wait for the next bytes of a stream.
    pub fn stream_idle(&self) -> Duration {
        self.stream_idle
    }

    /// `url` parsed, if it is http(s) and its host, when an address literal, is allowed.
    fn checked(&self, url: &str) -> Result<reqwest::Url, SendFailure> {
        let parsed = match reqwest::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => u,
            Ok(_) => return Err(SendFailure::InvalidUrl(format!("{url}: not http(s)"))),
            Err(e) => return Err(SendFailure::InvalidUrl(format!("{url}: {e}"))),
        };
        if let Some(host) = parsed.host_str()
            && let Ok(ip) = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
        {
            self.check_ip(ip)?;
        }
        Ok(parsed)
    }

    fn check_ip(&self, ip: IpAddr) -> Result<(), SendFailure> {
        self.policy.check(ip).map_err(|kind| {
            SendFailure::RefusedAddress(format!("{ip} is a {} address", kind.as_str()))
        })
    }

    /// Sends `method` to `url` and reads the whole answer, at most `max_bytes` of it (a larger
    /// answer is [`FetchError::TooLarge`]); never follows a redirect.
    pub async fn request_bounded(
        &self,
        method: reqwest::Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        max_bytes: usize,
    ) -> Result<Fetched, FetchError> {
        let parsed = self.checked(url).map_err(FetchError::Send)?;
        let mut headers = headers;
        crate::telemetry::inject(&mut headers);
        let mut request = self.http.request(method, parsed).headers(headers);
        if let Some(body) = body {
            request = request.body(body);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| FetchError::Send(classify(&e)))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let retry_after = retry_after(&headers);
        if response
            .content_length()
            .is_some_and(|n| n > max_bytes as u64)
        {
            return Err(FetchError::TooLarge { limit: max_bytes });
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| FetchError::Send(classify(&e)))?
        {
            if body.len() + chunk.len() > max_bytes {
                return Err(FetchError::TooLarge { limit: max_bytes });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched {
            status,
            headers,
            body,
            retry_after,
        })
    }

    /// Sends `method` to `url` and returns the response as soon as its head arrives, to be read
    /// as it comes (an event stream): the connect timeout applies, then the idle timeout between
    /// reads, and no total timeout.
    pub async fn open_stream(
        &self,
        method: reqwest::Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> Result<reqwest::Response, SendFailure> {
        let parsed = self.checked(url)?;
        let mut headers = headers;
        crate::telemetry::inject(&mut headers);
        let mut request = self.streams.request(method, parsed).headers(headers);
        if let Some(body) = body {
            request = request.body(body);
        }
        request.send().await.map_err(|e| classify(&e))
    }

    /// A TCP connection to `host:port` under the address rule (a literal address is checked, a
    /// name is resolved and only allowed addresses are tried), within the connect timeout.
    pub async fn connect_tcp(
        &self,
        host: &str,
        port: u16,
    ) -> Result<tokio::net::TcpStream, SendFailure> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let candidates: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => {
                self.check_ip(ip)?;
                vec![SocketAddr::new(ip, port)]
            }
            Err(_) => {
                let found: Vec<SocketAddr> = tokio::time::timeout(
                    self.connect_timeout,
                    tokio::net::lookup_host((bare, port)),
                )
                .await
                .map_err(|_| SendFailure::Timeout(format!("resolving {bare} timed out")))?
                .map_err(|e| SendFailure::Connect(format!("could not resolve {bare}: {e}")))?
                .collect();
                let allowed: Vec<SocketAddr> = found
                    .iter()
                    .copied()
                    .filter(|a| self.policy.check(a.ip()).is_ok())
                    .collect();
                if allowed.is_empty() {
                    let addrs = found
                        .iter()
                        .map(|a| a.ip().to_string())
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(SendFailure::RefusedAddress(
                        RefusedName {
                            host: bare.to_owned(),
                            addrs,
                        }
                        .to_string(),
                    ));
                }
                allowed
            }
        };
        let mut last = String::new();
        for addr in candidates {
            match tokio::time::timeout(self.connect_timeout, tokio::net::TcpStream::connect(addr))
                .await
            {
                Ok(Ok(tcp)) => {
                    let _ = tcp.set_nodelay(true);
                    return Ok(tcp);
                }
                Ok(Err(e)) => last = format!("could not connect to {addr}: {e}"),
                Err(_) => last = format!("connecting to {addr} timed out"),
            }
        }
        Err(SendFailure::Connect(last))
    }

    /// POSTs `body` to `url`; never follows a redirect (a 3xx is returned as it is). Like every
    /// request of this client, it carries the current span's trace context while tracing is on.
    pub async fn post(&self, url: &str, headers: HeaderMap, body: Vec<u8>) -> SendResult {
        let parsed = match self.checked(url) {
            Ok(u) => u,
            Err(f) => return SendResult::Failed(f),
        };
        let mut headers = headers;
        crate::telemetry::inject(&mut headers);
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
        let retry_after = retry_after(response.headers());
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

/// The `Retry-After` of `headers`, if any.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after)
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

/// What a reqwest failure was, as the outbox classifies failures.
pub fn classify(e: &reqwest::Error) -> SendFailure {
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
