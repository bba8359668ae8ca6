//! The long-polls of a session answered on the session rmcp keeps, outside rmcp's per-request
//! path: `inbox` with `wait_s`, and `claim` of `next` with `wait_s`.
//!
//! rmcp runs every call of a session as a request of its own: a channel with a replay cache, a
//! task, the dispatch and copies of the request head, about 9.5 KiB for as long as the call
//! waits (heaptrack, 10,000 waiting polls), plus the request's routing in the session's worker.
//! A waiting call is most of what a connected agent holds, so [`Sessions`] wraps rmcp's session
//! manager and answers those calls here: rmcp hands it a request only after checking host,
//! origin, session, protocol version and the standard headers, and `create_stream` either
//! answers a `tools/call` that waits, or passes the message to rmcp's session as before. The
//! answer is the tool's own ([`Tools::inbox_answer`]; [`Tools::claim_waiting`] then
//! [`Tools::claimed_next`]), with the same progress notifications, cancellation and session end
//! as through rmcp:
//!
//! - progress every [`PROGRESS_EVERY`] when the call carries a `progressToken`, on the call's
//!   own stream, as rmcp sends it;
//! - `notifications/cancelled` naming the call ends it with no answer: an `inbox` acknowledges
//!   nothing new, a `claim` takes nothing (a hand-off it held passes on);
//! - the end of the session (its client ends it, its credential ends, rmcp closes it idle)
//!   ends it with the tool's "cancelled" error, as [`with_progress`](super::progress) does.
//!
//! What this path does differently, written down: its events carry no event id, so a client
//! that loses the stream cannot resume it with `Last-Event-ID`, and a dropped stream ends the
//! wait at once (the client calls again: an `inbox` with the same `after` loses nothing and
//! returns nothing twice; a `claim` wait dropped before its hand-off took nothing). rmcp's idle
//! clock counts only the messages it sees, so each call answered here tells rmcp's session it
//! is in use (at most once a quarter of `mcp.session_idle`). Everything else, the 2026-07-28
//! stateless revision included, and any call this path is unsure of (arguments that do not
//! decode, `_meta` naming a protocol version or trace context, no wait, a `claim` of a given
//! thread), goes through rmcp unchanged.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use futures::future::Either;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientJsonRpcMessage,
    ClientNotification, ClientRequest, JsonRpcRequest, ProgressNotification,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId, ServerJsonRpcMessage,
    ServerNotification, ServerResult,
};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::args::{ClaimActionArg, ClaimArgs, InboxArgs};
use super::progress::PROGRESS_EVERY;
use super::sessions::SessionEnd;
use super::tools::{Parts, Tools, caller_in, cancelled_claim, cancelled_inbox};
use crate::mcp::render;

/// The tools whose waits are answered here.
const INBOX: &str = "inbox";
const CLAIM: &str = "claim";

/// rmcp's session manager, with the waiting `inbox` answered outside rmcp's per-request path.
pub(super) struct Sessions {
    inner: Arc<LocalSessionManager>,
    tools: Arc<Tools>,
    /// rmcp closes a session after this long without a message it saw.
    idle: Duration,
    /// What this path needs of each session, from its `initialize`.
    known: Mutex<HashMap<SessionId, Known>>,
    /// The calls waiting here, for `notifications/cancelled` and the session's end.
    calls: Arc<Calls>,
}

/// What a call answered here needs, read from its message.
struct Plan {
    waiting: Waiting,
    progress: Option<ProgressToken>,
    /// The session's client name, for the derived agent identity.
    client: Arc<str>,
}

/// The waits answered here.
enum Waiting {
    /// An `inbox` with `wait_s` ≥ 1.
    Inbox(InboxArgs),
    /// A `claim` of `next` with `wait_s` ≥ 1 (no fencing token, action `claim`).
    Claim {
        lease_s: Option<u64>,
        wait_s: u64,
        agent: Option<String>,
    },
}

impl Waiting {
    /// What a tool call asks to wait for, when it is a wait answered here.
    fn of(params: &CallToolRequestParams) -> Option<Self> {
        let args = || params.arguments.clone().map(serde_json::Value::Object);
        match params.name.as_ref() {
            INBOX => {
                let a: InboxArgs = serde_json::from_value(args()?).ok()?;
                (a.wait_s.unwrap_or(0) > 0).then_some(Self::Inbox(a))
            }
            CLAIM => {
                let a: ClaimArgs = serde_json::from_value(args()?).ok()?;
                let wait_s = a.wait_s.filter(|w| *w > 0)?;
                let next = a.thread == "next" && a.action == ClaimActionArg::Claim;
                (next && a.fencing_token.is_none()).then_some(Self::Claim {
                    lease_s: a.lease_s,
                    wait_s,
                    agent: a.agent,
                })
            }
            _ => None,
        }
    }

    fn tool(&self) -> &'static str {
        match self {
            Self::Inbox(_) => INBOX,
            Self::Claim { .. } => CLAIM,
        }
    }

    fn wait_s(&self) -> u64 {
        match self {
            Self::Inbox(a) => a.wait_s.unwrap_or(0),
            Self::Claim { wait_s, .. } => *wait_s,
        }
    }

    /// The agent identity the call names (`claim`'s `agent` argument).
    fn agent(&self) -> Option<&str> {
        match self {
            Self::Inbox(_) => None,
            Self::Claim { agent, .. } => agent.as_deref(),
        }
    }
}

/// A session as `initialize` left it.
struct Known {
    /// The name the client gave (`clientInfo.name`), for the derived agent identity.
    client: Arc<str>,
    /// Negotiated before 2026-07-28: results in the legacy shape (no `resultType`).
    legacy: bool,
    /// When rmcp's session was last told of a call answered here.
    told: Instant,
}

/// The calls waiting here, by session and request id.
#[derive(Default)]
struct Calls(Mutex<HashMap<(SessionId, RequestId), CancellationToken>>);

impl Calls {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(SessionId, RequestId), CancellationToken>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Sessions {
    pub(super) fn new(inner: Arc<LocalSessionManager>, tools: Tools, idle: Duration) -> Self {
        Self {
            inner,
            tools: Arc::new(tools),
            idle,
            known: Mutex::default(),
            calls: Arc::default(),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Known>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What this path needs to answer `message` itself; `None` when it is rmcp's to answer.
    fn plan(&self, session: &SessionId, message: &ClientJsonRpcMessage) -> Option<Plan> {
        let ClientJsonRpcMessage::Request(request) = message else {
            return None;
        };
        let ClientRequest::CallToolRequest(call) = &request.request else {
            return None;
        };
        let progress = plain_call(&call.params, call.extensions.get())?;
        let waiting = Waiting::of(&call.params)?;
        let client = match self.known().get(session) {
            Some(k) if k.legacy => k.client.clone(),
            _ => return None,
        };
        Some(Plan {
            waiting,
            progress,
            client,
        })
    }

    /// Starts the wait of call `id` of `session`, as planned.
    fn start(
        &self,
        session: &SessionId,
        id: RequestId,
        mut call: CallToolRequest,
        plan: Plan,
    ) -> Wait {
        let Plan {
            waiting,
            progress,
            client,
        } = plan;
        // The head rmcp put in the request: read what the call needs, then let it go.
        let parts = call.extensions.remove::<Parts>();
        let end = parts
            .as_ref()
            .and_then(|p| p.extensions.get::<SessionEnd>())
            .cloned();
        let span = parts
            .as_ref()
            .and_then(|p| p.extensions.get::<crate::telemetry::RequestSpan>())
            .map_or_else(tracing::Span::none, |s| s.0.clone());
        crate::telemetry::attribute(&span, "mcp.method.name", "tools/call");
        crate::telemetry::attribute(&span, "gen_ai.tool.name", waiting.tool());
        let caller = caller_in(parts.as_ref(), Some(&client), waiting.agent());
        drop(parts);

        let cancel = CancellationToken::new();
        let key = (session.clone(), id.clone());
        self.calls.lock().insert(key.clone(), cancel.clone());
        let registered = Registered {
            calls: self.calls.clone(),
            key,
        };
        let total_s = waiting.wait_s();
        let tools = self.tools.clone();
        let work = async move {
            let ended = async {
                match &end {
                    Some(end) => end.ended().await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(ended);
            let c = match caller {
                Ok((c, _)) => c,
                Err(e) => return Some(render::error(e)),
            };
            // Ordered: the session's end (its client's `DELETE` ends the waits before rmcp
            // closes the session, which cancels them too) answers that the call was cancelled.
            // Each arm's futures are boxed, so a wait holds only its own: inline, this future is
            // as large as its largest arm (a claim's answer is a thread page), and every waiting
            // `inbox` held the claim's room too. Release build: 4,440 bytes inline, 760 boxed;
            // 18.6 → 16.3 KiB of RSS per waiting poll (benches/mcp.rs, section 4).
            match waiting {
                Waiting::Inbox(args) => tokio::select! {
                    biased;
                    answer = Box::pin(tools.inbox_answer(c, args)) => Some(answer),
                    () = &mut ended => Some(cancelled_inbox()),
                    () = cancel.cancelled() => None,
                },
                Waiting::Claim {
                    lease_s, wait_s, ..
                } => {
                    let claim = tokio::select! {
                        biased;
                        claim = Box::pin(tools.claim_waiting(&c, lease_s, wait_s)) => claim,
                        () = &mut ended => return Some(render::error(cancelled_claim())),
                        () = cancel.cancelled() => return None,
                    };
                    // Claimed: the answer is read to the end, whatever happens to the call.
                    Some(match claim {
                        Ok(claim) => Box::pin(tools.claimed_next(&c, claim)).await,
                        Err(e) => render::error(e),
                    })
                }
            }
        };
        let progress = progress.map(|token| {
            let started = tokio::time::Instant::now();
            Progress {
                token,
                ticks: tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY),
                started,
                total_s,
            }
        });
        Wait {
            work: Mutex::new(Box::pin(work.instrument(span))),
            progress,
            registered: Some(registered),
        }
    }

    /// Tells rmcp's session that it is in use, at most once a quarter of its idle limit: its clock
    /// counts only the messages it sees, and the calls answered here are not among them.
    async fn tell_in_use(&self, session: &SessionId) {
        let due = match self.known().get_mut(session) {
            Some(k) if k.told.elapsed() >= self.idle / 4 => {
                k.told = Instant::now();
                true
            }
            _ => false,
        };
        if !due {
            return;
        }
        let handle = self.inner.sessions.read().await.get(session).cloned();
        if let Some(handle) = handle
            && let Ok(channel) = handle.establish_request_wise_channel().await
            && let Some(id) = channel.http_request_id
        {
            let _ = handle.close_request_wise_channel(id).await;
        }
    }
}

/// The progress token of a call this path may answer: one with no input responses or request
/// state, whose `_meta` (if any) holds no key the protocol reserves (`io.modelcontextprotocol/…`:
/// a per-request protocol version, client info or capabilities, which rmcp negotiates) and no
/// trace context. Other keys (a client's own, such as a tool-use id) change nothing in the answer.
/// `None`: leave it to rmcp.
fn plain_call(
    params: &CallToolRequestParams,
    meta: Option<&rmcp::model::RequestMetaObject>,
) -> Option<Option<ProgressToken>> {
    if params.input_responses.is_some() || params.request_state.is_some() {
        return None;
    }
    let mut token = None;
    for meta in [params.meta.as_ref(), meta].into_iter().flatten() {
        if meta.0.0.keys().any(|k| {
            k.starts_with("io.modelcontextprotocol/")
                || matches!(k.as_str(), "traceparent" | "tracestate" | "baggage")
        }) {
            return None;
        }
        token = token.or_else(|| meta.get_progress_token());
    }
    Some(token)
}

impl SessionManager for Sessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let client: Arc<str> = match &message {
            ClientJsonRpcMessage::Request(r) => match &r.request {
                ClientRequest::InitializeRequest(init) => init.params.client_info.name.as_str(),
                _ => "",
            },
            _ => "",
        }
        .into();
        let response = self.inner.initialize_session(id, message).await?;
        if let ServerJsonRpcMessage::Response(r) = &response
            && let ServerResult::InitializeResult(init) = &r.result
        {
            let legacy = init.protocol_version.as_str() < ProtocolVersion::V_2026_07_28.as_str();
            let known = Known {
                client,
                legacy,
                told: Instant::now(),
            };
            self.known().insert(id.clone(), known);
        }
        Ok(response)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    /// Also called by rmcp when a session's worker ends (idle, closed): the calls waiting here
    /// end with it.
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.known().remove(id);
        self.calls.lock().retain(|(session, _), cancel| {
            if session == id {
                cancel.cancel();
            }
            session != id
        });
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let plan = self.plan(id, &message);
        match (plan, message) {
            (
                Some(plan),
                ClientJsonRpcMessage::Request(JsonRpcRequest {
                    id: request,
                    request: ClientRequest::CallToolRequest(call),
                    ..
                }),
            ) => {
                let wait = self.start(id, request, call, plan);
                self.tell_in_use(id).await;
                Ok(Either::Left(wait))
            }
            (_, message) => Ok(Either::Right(self.inner.create_stream(id, message).await?)),
        }
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        if let ClientJsonRpcMessage::Notification(n) = &message
            && let ClientNotification::CancelledNotification(c) = &n.notification
            && let Some(request) = &c.params.request_id
            && let Some(cancel) = self.calls.lock().remove(&(id.clone(), request.clone()))
        {
            cancel.cancel();
            return Ok(());
        }
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

/// A waiting `inbox` call answered here: its progress notifications, then its answer.
pub(super) struct Wait {
    /// The call: `None` when it was cancelled. Boxed once; the mutex makes the stream `Sync`, as
    /// rmcp asks, and is never locked (`get_mut`).
    work: Mutex<Pin<Box<dyn Future<Output = Option<CallToolResult>> + Send>>>,
    progress: Option<Progress>,
    /// The call's entry among the waiting calls; `None` once answered.
    registered: Option<Registered>,
}

/// Progress while the call waits, for a call that sent a `progressToken`.
struct Progress {
    token: ProgressToken,
    ticks: tokio::time::Interval,
    started: tokio::time::Instant,
    total_s: u64,
}

/// A call's entry among the waiting calls, removed when the call ends or the client goes away.
struct Registered {
    calls: Arc<Calls>,
    key: (SessionId, RequestId),
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.key);
    }
}

impl Stream for Wait {
    type Item = ServerSseMessage;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ServerSseMessage>> {
        let this = self.get_mut();
        let Some(registered) = &this.registered else {
            return Poll::Ready(None);
        };
        let work = this.work.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Poll::Ready(answer) = work.as_mut().poll(cx) {
            let id = registered.key.1.clone();
            this.registered = None;
            return Poll::Ready(answer.map(|result| answered(id, result)));
        }
        if let Some(p) = &mut this.progress
            && p.ticks.poll_tick(cx).is_ready()
        {
            let waited = p.started.elapsed().as_secs_f64().floor();
            let note = ProgressNotificationParam::new(p.token.clone(), waited)
                .with_total(p.total_s as f64)
                .with_message(format!("Waiting ({waited:.0} of {} s).", p.total_s));
            let note = ServerNotification::ProgressNotification(ProgressNotification::new(note));
            return Poll::Ready(Some(ServerSseMessage::from_message(
                ServerJsonRpcMessage::notification(note),
            )));
        }
        Poll::Pending
    }
}

/// The call's answer, in the shape rmcp gives a session that negotiated before 2026-07-28.
fn answered(id: RequestId, result: CallToolResult) -> ServerSseMessage {
    let mut result = ServerResult::CallToolResult(result);
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    ServerSseMessage::from_message(ServerJsonRpcMessage::response(result, id))
}
