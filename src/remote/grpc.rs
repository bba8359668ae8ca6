//! The gRPC binding of the A2A client: `lf.a2a.v1.A2AService` over HTTP/2, hand-framed (5-byte
//! length prefix, uncompressed) on hyper's client connection. The TCP connection is opened by the
//! outbound client's guard (the same address rule as every other call); `http://host:port` is h2c
//! (prior knowledge), `https://host:port` TLS with ALPN `h2` and the platform's certificate
//! verification. One connection per interface URL is kept and shared by concurrent calls; a
//! closed one is replaced on the next call.
//!
//! The metadata carries `a2a-version`, `authorization` and the extra headers. A status other than
//! OK (in the trailers, or in a trailers-only answer) becomes [`CallError::Remote`] with the gRPC
//! code and the `google.rpc.ErrorInfo` reason of `grpc-status-details-bin`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};

use super::call::{Call, EventStream};
use super::error::excerpt;
use super::{CallError, RemoteError, RemoteTarget};
use crate::domain::delivery::SendFailure;
use crate::wire::pb;

/// The service path prefix of every method.
const SERVICE: &str = "/lf.a2a.v1.A2AService/";

/// HTTP/2 connections by interface URL.
#[derive(Default)]
pub(super) struct Connections {
    open: Mutex<HashMap<String, SendRequest<Full<Bytes>>>>,
    tls: OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Connections {
    fn tls(&self) -> Result<Arc<rustls::ClientConfig>, CallError> {
        self.tls
            .get_or_init(|| {
                use rustls_platform_verifier::ConfigVerifierExt as _;
                crate::net::tls::install_crypto_provider();
                let mut config = rustls::ClientConfig::with_platform_verifier()
                    .map_err(|e| format!("no TLS certificate verifier: {e}"))?;
                config.alpn_protocols = vec![b"h2".to_vec()];
                Ok(Arc::new(config))
            })
            .clone()
            .map_err(|e| CallError::Transport(SendFailure::Request(e)))
    }

    /// A ready sender on the connection to `url`, opening one when none is usable.
    async fn sender(
        &self,
        call: &Call<'_>,
        url: &str,
    ) -> Result<SendRequest<Full<Bytes>>, CallError> {
        let cached = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(url)
            .cloned();
        if let Some(mut sender) = cached {
            if !sender.is_closed() && sender.ready().await.is_ok() {
                return Ok(sender);
            }
            self.open
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(url);
        }
        let mut sender = self.connect(call, url).await?;
        sender
            .ready()
            .await
            .map_err(|e| CallError::Transport(SendFailure::Connect(e.to_string())))?;
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(url.to_owned(), sender.clone());
        Ok(sender)
    }

    async fn connect(
        &self,
        call: &Call<'_>,
        url: &str,
    ) -> Result<SendRequest<Full<Bytes>>, CallError> {
        let invalid =
            |why: &str| CallError::Transport(SendFailure::InvalidUrl(format!("{url}: {why}")));
        let parsed = reqwest::Url::parse(url).map_err(|e| invalid(&e.to_string()))?;
        let host = parsed
            .host_str()
            .ok_or_else(|| invalid("no host"))?
            .to_owned();
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| invalid("no port"))?;
        let outbound = call.outbound;
        let tcp = outbound
            .connect_tcp(&host, port)
            .await
            .map_err(CallError::Transport)?;
        let connect_timeout = outbound.connect_timeout();
        let handshake = async {
            let io: Box<dyn Io> = match parsed.scheme() {
                "http" => Box::new(tcp),
                "https" => {
                    let name = rustls::pki_types::ServerName::try_from(
                        host.trim_start_matches('[')
                            .trim_end_matches(']')
                            .to_owned(),
                    )
                    .map_err(|e| invalid(&e.to_string()))?;
                    let tls = tokio_rustls::TlsConnector::from(self.tls()?)
                        .connect(name, tcp)
                        .await
                        .map_err(|e| {
                            CallError::Transport(SendFailure::Connect(format!(
                                "TLS with {host}: {e}"
                            )))
                        })?;
                    Box::new(tls)
                }
                _ => return Err(invalid("not http(s)")),
            };
            hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .keep_alive_interval(Duration::from_secs(30))
                .keep_alive_timeout(Duration::from_secs(20))
                .handshake::<_, Full<Bytes>>(TokioIo::new(io))
                .await
                .map_err(|e| {
                    CallError::Transport(SendFailure::Connect(format!(
                        "HTTP/2 with {host}:{port}: {e}"
                    )))
                })
        };
        let (sender, connection) = tokio::time::timeout(connect_timeout, handshake)
            .await
            .map_err(|_| {
                CallError::Transport(SendFailure::Timeout(format!(
                    "connecting to {host}:{port} took longer than {connect_timeout:?}"
                )))
            })??;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "A gRPC connection to a remote agent ended.");
            }
        });
        Ok(sender)
    }
}

/// Sends one request; returns the answer's body once its head says it is a gRPC answer.
async fn send<Req: prost::Message>(
    call: &Call<'_>,
    connections: &Connections,
    t: &RemoteTarget,
    method: &str,
    req: Req,
) -> Result<Incoming, CallError> {
    let mut sender = connections.sender(call, &t.url).await?;
    let message = req.encode_to_vec();
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0);
    frame.extend_from_slice(
        &u32::try_from(message.len())
            .map_err(|_| CallError::Undecodable("the request is too large".into()))?
            .to_be_bytes(),
    );
    frame.extend_from_slice(&message);
    let mut request = hyper::Request::builder()
        .method(hyper::Method::POST)
        .uri(format!("{}{SERVICE}{method}", t.url))
        .body(Full::new(Bytes::from(frame)))
        .map_err(|e| CallError::Transport(SendFailure::InvalidUrl(e.to_string())))?;
    let headers = request.headers_mut();
    headers.extend(call.headers.clone());
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/grpc"),
    );
    headers.insert(
        hyper::header::TE,
        hyper::header::HeaderValue::from_static("trailers"),
    );
    crate::telemetry::inject(headers);
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| CallError::Transport(SendFailure::Request(e.to_string())))?;
    let (head, body) = response.into_parts();
    if let Some(status) = tonic::Status::from_header_map(&head.headers)
        && status.code() != tonic::Code::Ok
    {
        return Err(CallError::Remote(remote_error(&status)));
    }
    if head.status != hyper::StatusCode::OK {
        return Err(CallError::Status {
            code: head.status.as_u16(),
            retry_after: crate::net::outbound::retry_after(&head.headers),
        });
    }
    let grpc = head
        .headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if !grpc {
        return Err(CallError::Undecodable(
            "the answer is not application/grpc".into(),
        ));
    }
    Ok(body)
}

/// A unary call within the outbox's total timeout.
pub(super) async fn unary<Req, Resp>(
    call: &Call<'_>,
    connections: &Connections,
    t: &RemoteTarget,
    method: &str,
    req: Req,
) -> Result<Resp, CallError>
where
    Req: prost::Message,
    Resp: prost::Message + Default,
{
    let timeout = call.outbound.timeout();
    let work = async {
        let body = send(call, connections, t, method, req).await?;
        let mut reader = Frames::new(body, call.max_answer, None);
        let message = reader.next().await?;
        // Read to the end: the status in the trailers decides.
        while reader.next().await?.is_some() {}
        let bytes = message
            .ok_or_else(|| CallError::Undecodable("the answer ended without a message".into()))?;
        Resp::decode(bytes.as_slice())
            .map_err(|e| CallError::Undecodable(format!("not the A2A message expected: {e}")))
    };
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        CallError::Transport(SendFailure::Timeout(format!(
            "the call took longer than {timeout:?}"
        )))
    })?
}

/// A server-streaming call: the connect timeout for its head, then the idle timeout per read.
pub(super) async fn server_stream<Req: prost::Message>(
    call: &Call<'_>,
    connections: &Connections,
    t: &RemoteTarget,
    method: &str,
    req: Req,
) -> Result<EventStream, CallError> {
    let outbound = call.outbound;
    let head_timeout = outbound.timeout();
    let body = tokio::time::timeout(head_timeout, send(call, connections, t, method, req))
        .await
        .map_err(|_| {
            CallError::Transport(SendFailure::Timeout(format!(
                "the stream did not start within {head_timeout:?}"
            )))
        })??;
    let reader = Frames::new(body, call.max_answer, Some(outbound.stream_idle()));
    let stream = futures::stream::unfold(Some(reader), |reader| async move {
        let mut reader = reader?;
        match reader.next().await {
            Ok(Some(bytes)) => match pb::StreamResponse::decode(bytes.as_slice()) {
                Ok(event) => Some((Ok(event), Some(reader))),
                Err(e) => Some((
                    Err(CallError::Undecodable(format!(
                        "a stream event is not a StreamResponse: {e}"
                    ))),
                    None,
                )),
            },
            Ok(None) => None,
            Err(e) => Some((Err(e), None)),
        }
    });
    Ok(Box::pin(stream.fuse()))
}

use prost::Message as _;

/// Length-prefixed messages of a gRPC answer body, then its status.
struct Frames {
    body: Incoming,
    buffer: Vec<u8>,
    ended: bool,
    max: usize,
    idle: Option<Duration>,
}

impl Frames {
    fn new(body: Incoming, max: usize, idle: Option<Duration>) -> Frames {
        Frames {
            body,
            buffer: Vec::new(),
            ended: false,
            max,
            idle,
        }
    }

    /// The next message; none at the end of an OK answer; the status as an error otherwise.
    async fn next(&mut self) -> Result<Option<Vec<u8>>, CallError> {
        loop {
            if self.buffer.len() >= 5 {
                if self.buffer[0] != 0 {
                    return Err(CallError::Undecodable(
                        "a compressed message (liaison asks for none)".into(),
                    ));
                }
                let length = u32::from_be_bytes([
                    self.buffer[1],
                    self.buffer[2],
                    self.buffer[3],
                    self.buffer[4],
                ]) as usize;
                if length > self.max {
                    return Err(CallError::TooLarge { limit: self.max });
                }
                if self.buffer.len() >= 5 + length {
                    let message = self.buffer[5..5 + length].to_vec();
                    self.buffer.drain(..5 + length);
                    return Ok(Some(message));
                }
            }
            if self.ended {
                if !self.buffer.is_empty() {
                    return Err(CallError::Undecodable("the answer ends mid-message".into()));
                }
                return Ok(None);
            }
            let frame = match self.idle {
                Some(idle) => tokio::time::timeout(idle, self.body.frame())
                    .await
                    .map_err(|_| {
                        CallError::Transport(SendFailure::Timeout(format!(
                            "the stream was idle for {idle:?}"
                        )))
                    })?,
                None => self.body.frame().await,
            };
            match frame {
                None => {
                    return Err(CallError::Undecodable(
                        "the answer ended without a gRPC status".into(),
                    ));
                }
                Some(Err(e)) => {
                    return Err(CallError::Transport(SendFailure::Request(e.to_string())));
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        if self.buffer.len() + data.len() > self.max + 5 {
                            return Err(CallError::TooLarge { limit: self.max });
                        }
                        self.buffer.extend_from_slice(&data);
                    }
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            match tonic::Status::from_header_map(&trailers) {
                                Some(s) if s.code() == tonic::Code::Ok => self.ended = true,
                                Some(s) => return Err(CallError::Remote(remote_error(&s))),
                                None => {
                                    return Err(CallError::Undecodable(
                                        "the answer's trailers carry no gRPC status".into(),
                                    ));
                                }
                            }
                        }
                    }
                },
            }
        }
    }
}

fn remote_error(status: &tonic::Status) -> RemoteError {
    use tonic_types::StatusExt as _;
    let code = status.code();
    RemoteError {
        code: code as i64,
        reason: status.get_details_error_info().map(|i| excerpt(&i.reason)),
        message: excerpt(status.message()),
        http_status: None,
        retryable: matches!(
            code,
            tonic::Code::Unavailable
                | tonic::Code::DeadlineExceeded
                | tonic::Code::ResourceExhausted
                | tonic::Code::Aborted
        ),
    }
}
