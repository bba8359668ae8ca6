//! The one conversion module between A2A wire types and liaison's service types, both ways.
//!
//! Mapping (SPEC §8):
//! - task id = thread id; `contextId` = the task's context (scoped to its party);
//! - a message by the party is `ROLE_USER`, by the team `ROLE_AGENT`; its id is liaison's message id;
//! - parts ↔ body and attachments: every `text` part joins the body (separated by a blank line);
//!   `raw` → an inline attachment, `url` → a URL attachment, `data` → a JSON data attachment; back,
//!   the body is one `text` part followed by the attachments;
//! - the team's replies are the task's artifacts (one per reply, id = the message id); a reply's
//!   structured result is one more `data` part of its artifact, media type [`RESULT_MEDIA_TYPE`];
//! - the status message is the team's last announce, question or close when that set the state
//!   (a close's text and attachments, whatever its outcome, done included).
//!
//! Service errors map onto the A2A error table here too, so every binding answers alike.

use crate::domain::{
    ENVELOPE_EXTENSION, Envelope, Kind, MessageId, TaskState, ThreadId, Timestamp,
};
use crate::service::{
    ErrorCode, PushConfigSpec, ServiceError, TaskApproval, TaskMessage, TaskView, client_message_id,
};
use crate::store::{MessageRecord, PushConfigRecord, TaskEventRecord, TaskFilter, ThreadRecord};
use crate::wire::errors::{A2aError, ErrorKind};
use crate::wire::parts::{parts_in, parts_out};
use crate::wire::pb;
use crate::wire::wkt::Timestamp as PbTimestamp;

/// The `message.metadata` key naming the skill of a new task.
pub const SKILL_METADATA: &str = "skill";

pub fn task_state(s: TaskState) -> pb::TaskState {
    match s {
        TaskState::Submitted => pb::TaskState::Submitted,
        TaskState::Working => pb::TaskState::Working,
        TaskState::InputRequired => pb::TaskState::InputRequired,
        TaskState::Completed => pb::TaskState::Completed,
        TaskState::Failed => pb::TaskState::Failed,
        TaskState::Canceled => pb::TaskState::Canceled,
        TaskState::Rejected => pb::TaskState::Rejected,
    }
}

/// The task-state filter of ListTasks; `Unspecified` means none.
pub fn task_state_filter(s: pb::TaskState) -> Result<Option<TaskState>, A2aError> {
    Ok(Some(match s {
        pb::TaskState::Unspecified => return Ok(None),
        pb::TaskState::Submitted => TaskState::Submitted,
        pb::TaskState::Working => TaskState::Working,
        pb::TaskState::InputRequired => TaskState::InputRequired,
        pb::TaskState::Completed => TaskState::Completed,
        pb::TaskState::Failed => TaskState::Failed,
        pb::TaskState::Canceled => TaskState::Canceled,
        pb::TaskState::Rejected => TaskState::Rejected,
        pb::TaskState::AuthRequired => {
            return Err(A2aError::new(
                ErrorKind::InvalidParams,
                "liaison never asks for auth in a task",
            ));
        }
    }))
}

fn timestamp(t: Timestamp) -> PbTimestamp {
    PbTimestamp {
        seconds: t.0.div_euclid(1000),
        nanos: (t.0.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// A party's message from the wire. Ids that are not ours are "not found" (they cannot be the
/// party's tasks); empty parts or a missing message id are invalid params.
pub fn incoming_message(m: pb::Message) -> Result<TaskMessage, A2aError> {
    let invalid = |why: String| A2aError::new(ErrorKind::InvalidParams, why);
    if m.message_id.is_empty() {
        return Err(invalid("message.messageId is required".into()));
    }
    if m.role == pb::Role::Agent as i32 {
        return Err(invalid(
            "message.role must be ROLE_USER for a message sent to liaison".into(),
        ));
    }
    if m.parts.is_empty() {
        return Err(invalid("message.parts must hold at least one part".into()));
    }
    let task_id = match m.task_id.as_str() {
        "" => None,
        id => Some(ThreadId::parse(id).map_err(|_| not_found_task(id))?),
    };
    let reference_task_ids = m
        .reference_task_ids
        .iter()
        .map(|id| ThreadId::parse(id.as_str()).map_err(|_| not_found_task(id)))
        .collect::<Result<_, _>>()?;
    let skill = m
        .metadata
        .as_ref()
        .and_then(|s| s.fields.get(SKILL_METADATA))
        .and_then(|v| match &v.kind {
            Some(pbjson_types::value::Kind::StringValue(s)) => Some(s.clone()),
            _ => None,
        });
    let envelope = m
        .metadata
        .as_ref()
        .and_then(|s| s.fields.get(ENVELOPE_EXTENSION))
        .and_then(|v| envelope_of(v, &m.message_id));
    let (body, attachments) = parts_in(m.parts)?;
    Ok(TaskMessage {
        envelope,
        message_id: m.message_id,
        task_id,
        context_id: (!m.context_id.is_empty()).then_some(m.context_id),
        skill,
        body,
        attachments,
        reference_task_ids,
    })
}

/// The liaison envelope a message's metadata carries (SPEC §4, [`ENVELOPE_EXTENSION`]); data that
/// is not one is ignored with a warning, never refused.
fn envelope_of(value: &pbjson_types::Value, message_id: &str) -> Option<Envelope> {
    let parsed = serde_json::to_value(value)
        .map_err(|e| e.to_string())
        .and_then(Envelope::from_json);
    match parsed {
        Ok(envelope) => Some(envelope),
        Err(why) => {
            tracing::warn!(
                message_id = %crate::domain::text::quote(message_id),
                extension = ENVELOPE_EXTENSION,
                "Ignored malformed liaison envelope data: {why}."
            );
            None
        }
    }
}

/// The extension data of a reply's artifact: its kind and structured result.
fn reply_envelope(m: &MessageRecord) -> Option<pbjson_types::Struct> {
    let envelope = Envelope {
        kind: Kind::Reply,
        impact: None,
        result: m.result.clone(),
    };
    let value: pbjson_types::Value = serde_json::from_value(envelope.to_json()).ok()?;
    let mut fields = std::collections::HashMap::new();
    fields.insert(ENVELOPE_EXTENSION.to_owned(), value);
    Some(pbjson_types::Struct {
        fields: fields.into_iter().collect(),
    })
}

fn not_found_task(id: &str) -> A2aError {
    A2aError::new(ErrorKind::TaskNotFound, format!("no task {id}"))
}

/// One thread message as an A2A message of its task.
/// The id a message goes by on A2A: the party's own `messageId` for its messages (kept as the
/// idempotency key `a2a:<messageId>`, see `service::tasks`), so a client finds its messages in
/// history by the ids it gave them; liaison's `msg_…` id for the team's.
fn message_id(m: &MessageRecord, thread: &ThreadRecord) -> String {
    let client_id = (m.author == thread.opened_by)
        .then(|| client_message_id(m.idempotency_key.as_deref()?))
        .flatten()
        .filter(|id| !id.is_empty());
    client_id.map_or_else(|| m.id.to_string(), str::to_owned)
}

pub fn message(m: &MessageRecord, thread: &ThreadRecord) -> pb::Message {
    let role = if m.author == thread.opened_by {
        pb::Role::User
    } else {
        pb::Role::Agent
    };
    let task = thread.task.as_ref();
    pb::Message {
        message_id: message_id(m, thread),
        context_id: task.map(|t| t.context_id.clone()).unwrap_or_default(),
        task_id: thread.id.to_string(),
        role: role as i32,
        parts: parts_out(&m.body, &m.attachments),
        reference_task_ids: if m.position == 1 {
            task.map(|t| {
                t.reference_task_ids
                    .iter()
                    .map(ToString::to_string)
                    .collect()
            })
            .unwrap_or_default()
        } else {
            Vec::new()
        },
        ..Default::default()
    }
}

/// A reply of the team given as a direct answer: a message of no task (the party has none to
/// follow), in the task's context.
pub fn direct_message(m: &MessageRecord, thread: &ThreadRecord) -> pb::Message {
    pb::Message {
        task_id: String::new(),
        metadata: reply_envelope(m),
        extensions: vec![ENVELOPE_EXTENSION.to_owned()],
        ..message(m, thread)
    }
}

/// A reply of the team as an artifact.
pub fn artifact(m: &MessageRecord) -> pb::Artifact {
    let mut parts = parts_out(&m.body, &m.attachments);
    if let Some(result) = &m.result {
        parts.push(result_part(result));
    }
    pb::Artifact {
        artifact_id: m.id.to_string(),
        name: "reply".into(),
        parts,
        metadata: reply_envelope(m),
        extensions: vec![ENVELOPE_EXTENSION.to_owned()],
        ..Default::default()
    }
}

/// The media type of the data part carrying a reply's structured result (SPEC §4): its data is
/// the result object (`status`, `summary`, `changed`, `checks`, `links`).
pub use crate::domain::RESULT_MEDIA_TYPE;

/// A reply's structured result as a data part next to the reply's text.
fn result_part(result: &crate::domain::ReplyResult) -> pb::Part {
    pb::Part {
        content: serde_json::to_value(result)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
            .map(pb::part::Content::Data),
        media_type: RESULT_MEDIA_TYPE.into(),
        ..Default::default()
    }
}

/// The status of a task: its state, when it last changed, and the team's message that set it;
/// a submitted task whose request awaits (or has just received) a human's approval says so.
pub fn status(view: &TaskView) -> pb::TaskStatus {
    let state = view.state();
    let cause = view
        .history
        .iter()
        .rev()
        .find(|m| m.author != view.thread.opened_by || m.kind == Kind::Close);
    let mut status = status_with(&view.thread, state, cause, view.thread.updated_at);
    if state == TaskState::Submitted
        && let Some(note) = approval_note(&view.thread, view.approval.as_ref())
    {
        status.message = Some(note);
    }
    // A rejected or expired approval ended the task: its final message says so in data too.
    if state == TaskState::Rejected
        && let (Some(a), Some(message)) = (view.approval.as_ref(), status.message.take())
    {
        status.message = Some(super::approval::note(message, a));
    }
    status
}

/// The status message of a progress event: the note (tool, target, ok or failed), from the
/// team's side, with an id derived from the task and the event.
fn progress_note(thread: &ThreadRecord, seq: i64, note: &str) -> pb::Message {
    server_note(
        thread,
        format!("{}-progress-{seq}", thread.id),
        format!("Progress: {note}"),
    )
}

/// A status message from the team's side about `thread`'s task, with its own id.
fn server_note(thread: &ThreadRecord, message_id: String, text: String) -> pb::Message {
    pb::Message {
        message_id,
        context_id: thread
            .task
            .as_ref()
            .map(|t| t.context_id.clone())
            .unwrap_or_default(),
        task_id: thread.id.to_string(),
        role: pb::Role::Agent as i32,
        parts: vec![pb::Part {
            content: Some(pb::part::Content::Text(text)),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The server's status message about a task's approval ([`super::approval::note`]).
fn approval_note(thread: &ThreadRecord, approval: Option<&TaskApproval>) -> Option<pb::Message> {
    let a = approval?;
    let text = a.status_text()?;
    let note = server_note(thread, format!("{}-{}", a.id, a.state), text);
    Some(super::approval::note(note, a))
}

fn status_with(
    thread: &ThreadRecord,
    state: TaskState,
    cause: Option<&MessageRecord>,
    at: Timestamp,
) -> pb::TaskStatus {
    // A close's words (and attachments) are the final status message of whatever state it set,
    // done (`completed`) included; a close that says nothing sends no message, since an A2A
    // message needs a part. A reply that completes the task is its artifact instead.
    let shows = |m: &MessageRecord| match state {
        TaskState::Working => m.kind == Kind::Announce,
        TaskState::InputRequired => m.kind.awaits_reply(),
        TaskState::Completed | TaskState::Failed | TaskState::Rejected | TaskState::Canceled => {
            m.kind == Kind::Close && !(m.body.trim().is_empty() && m.attachments.is_empty())
        }
        TaskState::Submitted => false,
    };
    pb::TaskStatus {
        state: task_state(state) as i32,
        message: cause.filter(|m| shows(m)).map(|m| message(m, thread)),
        timestamp: Some(timestamp(at)),
    }
}

/// A task on the wire; `history_length` of 0 leaves the history out.
pub fn task(view: &TaskView, include_history: bool) -> pb::Task {
    let thread = &view.thread;
    pb::Task {
        id: thread.id.to_string(),
        context_id: thread
            .task
            .as_ref()
            .map(|t| t.context_id.clone())
            .unwrap_or_default(),
        status: Some(status(view)),
        artifacts: view.artifacts.iter().map(artifact).collect(),
        history: if include_history {
            view.history.iter().map(|m| message(m, thread)).collect()
        } else {
            Vec::new()
        },
        metadata: None,
    }
}

/// The stream responses of one logged event: a reply's artifact comes before its status update.
pub fn event(
    ev: &TaskEventRecord,
    thread: &ThreadRecord,
    cause: Option<&MessageRecord>,
    approval: Option<&TaskApproval>,
) -> Vec<pb::StreamResponse> {
    let context_id = thread
        .task
        .as_ref()
        .map(|t| t.context_id.clone())
        .unwrap_or_default();
    let mut out = Vec::with_capacity(2);
    if let Some(m) = cause
        && m.kind == Kind::Reply
        && m.author != thread.opened_by
    {
        out.push(pb::StreamResponse {
            payload: Some(pb::stream_response::Payload::ArtifactUpdate(
                pb::TaskArtifactUpdateEvent {
                    task_id: thread.id.to_string(),
                    context_id: context_id.clone(),
                    artifact: Some(artifact(m)),
                    append: false,
                    last_chunk: true,
                    metadata: None,
                },
            )),
        });
    }
    out.push(pb::StreamResponse {
        payload: Some(pb::stream_response::Payload::StatusUpdate(
            pb::TaskStatusUpdateEvent {
                task_id: thread.id.to_string(),
                context_id,
                status: Some({
                    let mut status = status_with(thread, ev.state, cause, ev.created_at);
                    // A decision on the approval (or the opening request) of a submitted task.
                    if ev.state == TaskState::Submitted
                        && let Some(note) = approval_note(thread, approval)
                    {
                        status.message = Some(note);
                    }
                    // A progress note of the agent's own tools, on a working task.
                    if let Some(note) = &ev.note {
                        status.message = Some(progress_note(thread, ev.seq, note));
                    }
                    status
                }),
                metadata: None,
            },
        )),
    });
    out
}

/// `historyLength`: none is all, a negative value is invalid.
pub fn history_length(n: Option<i32>) -> Result<Option<usize>, A2aError> {
    n.map(|n| {
        usize::try_from(n)
            .map_err(|_| invalid_params(format!("historyLength {n} must not be negative")))
    })
    .transpose()
}

/// The task of a request's `id`: an id that is not ours cannot be the caller's task.
pub fn task_id(id: &str) -> Result<ThreadId, A2aError> {
    if id.is_empty() {
        return Err(invalid_params("the task id is required"));
    }
    ThreadId::parse(id).map_err(|_| A2aError::new(ErrorKind::TaskNotFound, format!("no task {id}")))
}

/// ListTasks page size when the request gives none.
pub const DEFAULT_PAGE_SIZE: i32 = 50;

/// The store filter of a ListTasks request: page size 1-100 (default 50), a known non-`AUTH_REQUIRED`
/// status, and `statusTimestampAfter` rounded up to the millisecond (the filter is "at or after").
pub fn list_filter(req: &pb::ListTasksRequest) -> Result<TaskFilter, A2aError> {
    let page_size = req.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
    if !(1..=100).contains(&page_size) {
        return Err(invalid_params(format!(
            "pageSize {page_size} is out of range: use 1-100"
        )));
    }
    let state = pb::TaskState::try_from(req.status)
        .map_err(|_| invalid_params(format!("unknown status {}", req.status)))?;
    let updated_since = req
        .status_timestamp_after
        .map(|t| {
            if !(0..1_000_000_000).contains(&t.nanos) {
                return Err(invalid_params("statusTimestampAfter has invalid nanos"));
            }
            t.seconds
                .checked_mul(1000)
                .and_then(|ms| ms.checked_add((i64::from(t.nanos) + 999_999) / 1_000_000))
                .map(Timestamp)
                .ok_or_else(|| invalid_params("statusTimestampAfter is out of range"))
        })
        .transpose()?;
    Ok(TaskFilter {
        context_id: (!req.context_id.is_empty()).then(|| req.context_id.clone()),
        state: task_state_filter(state)?,
        updated_since,
        limit: i64::from(page_size),
        offset: 0,
    })
}

/// A push config from the wire; refused without an http(s) URL or with credentials but no scheme.
pub fn push_spec(c: pb::TaskPushNotificationConfig) -> Result<PushConfigSpec, A2aError> {
    // Checked before a SendMessage creates its task (the service checks the URL again).
    if !(c.url.starts_with("https://") || c.url.starts_with("http://")) {
        return Err(invalid_params(
            "the push notification config needs an http(s) url",
        ));
    }
    let (auth_scheme, auth_credentials) = match c.authentication {
        Some(a) if !a.scheme.is_empty() => (
            Some(a.scheme),
            (!a.credentials.is_empty()).then_some(a.credentials),
        ),
        Some(a) if !a.credentials.is_empty() => {
            return Err(invalid_params(
                "authentication.scheme is required with credentials",
            ));
        }
        _ => (None, None),
    };
    Ok(PushConfigSpec {
        id: (!c.id.is_empty()).then_some(c.id),
        url: c.url,
        token: (!c.token.is_empty()).then_some(c.token),
        auth_scheme,
        auth_credentials,
    })
}

fn invalid_params(why: impl Into<String>) -> A2aError {
    A2aError::new(ErrorKind::InvalidParams, why)
}

/// A stored push config on the wire; credentials are never shown back.
pub fn push_config(c: &PushConfigRecord) -> pb::TaskPushNotificationConfig {
    pb::TaskPushNotificationConfig {
        tenant: String::new(),
        id: c.id.clone(),
        task_id: c.thread.to_string(),
        url: c.url.clone(),
        token: c.token.clone().unwrap_or_default(),
        authentication: c.auth_scheme.as_ref().map(|scheme| pb::AuthenticationInfo {
            scheme: scheme.clone(),
            credentials: String::new(),
        }),
    }
}

/// The message id an event was caused by, if any.
pub fn event_message(ev: &TaskEventRecord) -> Option<&MessageId> {
    ev.message.as_ref()
}

/// Lets the handler use `?` on service calls: the one mapping below.
impl From<ServiceError> for A2aError {
    fn from(e: ServiceError) -> Self {
        service_error(e)
    }
}

/// A service error as an A2A error. Every code is decided here, with no catch-all, so a new code
/// cannot reach A2A clients without a decision (the test over `ErrorCode::ALL` holds it):
pub fn service_error(e: ServiceError) -> A2aError {
    let kind = a2a_kind(e.code);
    let retry_after = e.retry_after_s();
    let error = A2aError::new(kind, e.message);
    match retry_after {
        Some(s) => error.with_metadata(crate::wire::errors::RETRY_AFTER_KEY, s.to_string()),
        None => error,
    }
}

/// The A2A error kind of a service error code, from the spec's error table (§3.3.2, §5.4).
pub fn a2a_kind(code: ErrorCode) -> ErrorKind {
    match code {
        // Unknown and foreign tasks look the same.
        ErrorCode::NotFound => ErrorKind::TaskNotFound,
        ErrorCode::TaskNotCancelable => ErrorKind::TaskNotCancelable,
        // A message to a task that ended, or to a thread that closed: the spec's "operation not
        // supported" for a task in a terminal state.
        ErrorCode::TaskTerminal | ErrorCode::ThreadClosed | ErrorCode::SessionEnded => {
            ErrorKind::UnsupportedOperation
        }
        // State conflicts of claims, leases and approvals: the request is valid, but cannot be
        // carried out on the task as it stands (gRPC FAILED_PRECONDITION in v1.0.1).
        ErrorCode::AlreadyClaimed
        | ErrorCode::StaleClaim
        | ErrorCode::NotClaimable
        | ErrorCode::LeaseHeld
        | ErrorCode::ApprovalPending
        | ErrorCode::ApprovalDecided
        | ErrorCode::ApprovalExpired => ErrorKind::UnsupportedOperation,
        // The caller's parameters: invalid, missing, a reused id, an id that exists already, a
        // cursor past the end.
        ErrorCode::InvalidInput
        | ErrorCode::ThreadRequired
        | ErrorCode::IdempotencyConflict
        | ErrorCode::AlreadyExists
        | ErrorCode::CursorAhead => ErrorKind::InvalidParams,
        // Credentials refused (HTTP 401, gRPC UNAUTHENTICATED).
        ErrorCode::Unauthenticated | ErrorCode::TokenExpired | ErrorCode::TokenRevoked => {
            ErrorKind::Unauthenticated
        }
        // Authenticated, not allowed: a member's token on A2A, a skill the party may not use, or a
        // request whose impact the channel's policy denies (HTTP 403, gRPC PERMISSION_DENIED).
        ErrorCode::Forbidden | ErrorCode::DeniedByPolicy => ErrorKind::PermissionDenied,
        // A limit of the caller's: retry after the wait the metadata carries.
        ErrorCode::RateLimited
        | ErrorCode::TooManyStreams
        | ErrorCode::TooManyWaiters
        | ErrorCode::TooManySessions
        | ErrorCode::TooManyTokens => ErrorKind::ResourceExhausted,
        // The server cannot serve now but may shortly (a database restart, a full disk; a remote
        // agent liaison depends on being unreachable): each binding's retryable code.
        ErrorCode::Unavailable | ErrorCode::RemoteUnreachable => ErrorKind::Unavailable,
        // Admin operations on remote agents' cards; never a party's call, and not the caller's
        // to fix if one ever reached it.
        ErrorCode::CardRejected | ErrorCode::KeysChanged => ErrorKind::InternalError,
        ErrorCode::Internal => ErrorKind::InternalError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::wire::parts::text_part as text;

    #[test]
    fn every_state_has_a_wire_value_and_back() {
        for s in TaskState::ALL {
            let wire = task_state(*s);
            assert_eq!(task_state_filter(wire).unwrap(), Some(*s));
        }
        assert_eq!(task_state_filter(pb::TaskState::Unspecified).unwrap(), None);
    }

    #[test]
    fn a_message_needs_an_id_parts_and_our_ids() {
        let ok = pb::Message {
            message_id: "m".into(),
            role: pb::Role::User as i32,
            parts: vec![text("hi")],
            ..Default::default()
        };
        assert!(incoming_message(ok.clone()).is_ok());
        assert!(
            incoming_message(pb::Message {
                message_id: String::new(),
                ..ok.clone()
            })
            .is_err()
        );
        assert!(
            incoming_message(pb::Message {
                parts: vec![],
                ..ok.clone()
            })
            .is_err()
        );
        let foreign = incoming_message(pb::Message {
            task_id: "not-ours".into(),
            ..ok
        })
        .unwrap_err();
        assert_eq!(foreign.kind, ErrorKind::TaskNotFound);
    }

    #[test]
    fn list_requests_become_filters() {
        let filter = list_filter(&pb::ListTasksRequest {
            context_id: "ctx".into(),
            status: pb::TaskState::InputRequired as i32,
            status_timestamp_after: Some(crate::wire::wkt::Timestamp {
                seconds: 10,
                nanos: 1,
            }),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(filter.context_id.as_deref(), Some("ctx"));
        assert_eq!(filter.state, Some(TaskState::InputRequired));
        // Rounded up: the filter is "at or after", so 10.000000001 s starts at 10.001 s.
        assert_eq!(filter.updated_since, Some(Timestamp(10_001)));
        assert_eq!(filter.limit, i64::from(DEFAULT_PAGE_SIZE));
        let none = list_filter(&pb::ListTasksRequest::default()).unwrap();
        assert_eq!(
            (none.context_id, none.state, none.updated_since),
            (None, None, None)
        );
        for bad in [
            pb::ListTasksRequest {
                status: 99,
                ..Default::default()
            },
            pb::ListTasksRequest {
                status: pb::TaskState::AuthRequired as i32,
                ..Default::default()
            },
            pb::ListTasksRequest {
                page_size: Some(0),
                ..Default::default()
            },
            pb::ListTasksRequest {
                page_size: Some(101),
                ..Default::default()
            },
        ] {
            assert_eq!(
                list_filter(&bad).unwrap_err().kind,
                ErrorKind::InvalidParams
            );
        }
    }

    #[test]
    fn bad_push_configs_and_history_lengths_are_invalid_params() {
        let negative = history_length(Some(-1)).unwrap_err();
        assert_eq!(negative.kind, ErrorKind::InvalidParams);
        let credentials_without_scheme = push_spec(pb::TaskPushNotificationConfig {
            url: "https://x.test".into(),
            authentication: Some(pb::AuthenticationInfo {
                scheme: String::new(),
                credentials: "c".into(),
            }),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(credentials_without_scheme.kind, ErrorKind::InvalidParams);
        let no_url = push_spec(pb::TaskPushNotificationConfig {
            url: "ftp://x.test".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(no_url.kind, ErrorKind::InvalidParams);
    }

    #[test]
    fn every_service_error_code_has_its_a2a_kind() {
        use ErrorKind as K;
        for code in ErrorCode::ALL {
            let expected = match code {
                ErrorCode::NotFound => K::TaskNotFound,
                ErrorCode::TaskNotCancelable => K::TaskNotCancelable,
                ErrorCode::Unauthenticated | ErrorCode::TokenExpired | ErrorCode::TokenRevoked => {
                    K::Unauthenticated
                }
                ErrorCode::Forbidden | ErrorCode::DeniedByPolicy => K::PermissionDenied,
                ErrorCode::InvalidInput
                | ErrorCode::ThreadRequired
                | ErrorCode::IdempotencyConflict
                | ErrorCode::AlreadyExists
                | ErrorCode::CursorAhead => K::InvalidParams,
                ErrorCode::RateLimited
                | ErrorCode::TooManyStreams
                | ErrorCode::TooManyWaiters
                | ErrorCode::TooManySessions
                | ErrorCode::TooManyTokens => K::ResourceExhausted,
                ErrorCode::Unavailable | ErrorCode::RemoteUnreachable => K::Unavailable,
                ErrorCode::CardRejected | ErrorCode::KeysChanged | ErrorCode::Internal => {
                    K::InternalError
                }
                _ => K::UnsupportedOperation,
            };
            assert_eq!(a2a_kind(*code), expected, "{code}");
        }
    }

    #[test]
    fn an_outage_is_the_retryable_code_of_every_binding_with_its_wait() {
        use crate::wire::errors::SpecVersion;
        let outage = ServiceError::new(ErrorCode::Unavailable, "the database is unavailable")
            .with_details(serde_json::json!({"retry_after_s": 2}));
        let e = service_error(outage);
        assert_eq!(e.jsonrpc_error()["code"], -31503);
        for version in [SpecVersion::V1_0_0, SpecVersion::V1_0_1] {
            assert_eq!(e.rest_error(version).0.as_u16(), 503);
            assert_eq!(e.grpc_status(version).code(), tonic::Code::Unavailable);
        }
        assert_eq!(e.retry_after_s(), Some(2));
    }
}
